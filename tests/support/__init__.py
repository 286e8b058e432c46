"""What the test modules share, one idea a module; test modules import from here,
never from each other.

    real_text          text already on this machine (stdlib, man pages), the cl100k rank file and
                       real models' tokenizer.json files
    corpora            input files: text corpora, compressed as named, and token shards
    cli                the beam-bpe commands run in-process, and the shared runner flags
    outputs            readers of what the commands write
    read_assertions    the Documents and dead letters a ReadDocuments yields
    toy_tokenizers     small tokenizers trained in memory or made of random merges
    reference_packer   a plain packer written from the definition of beam-bpe pack
    beam_services      a local job service and SDK worker pool (the PortableRunner fixture)

The headless-browser driver that the report page's tests use is ``benchmarks/chromium.py``:
the report benchmark drives the same page with it.
"""
