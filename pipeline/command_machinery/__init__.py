"""The machinery every command shares; the commands themselves are the folders beside this one.

    outputs.py             the job-output contract: paths, atomic writes, staging, completion markers
    unreadable_records.py  the dead letters a job left, read back: the summary lines and --strict
    output_lock.py         one job at a time per output directory (``DIR/.beam-bpe.lock``)
    disk_full.py           a full disk during a job, said in one line
    interrupts.py          Ctrl-C and SIGTERM, handled alike
    progress.py            how far a running Beam job is, on stderr
    runners.py             Beam pipeline options: runner defaults, refusals, metrics
    job_service.py         what a portable job's job service is asked (its options, a cancel)
    config.py              ``--config``: flag values from YAML files and the presets in ``pipeline/configs/``
    tokenizer_flags.py     ``--tokenizer`` and ``--tokenizer-preset``
    errors.py              ``UserError`` and ``JobFailed``: a mistake, or a job failed on a cluster, as one line

Nothing is imported here: the command line imports ``disk_full`` and ``output_lock``
before Beam, and the others import Beam.
"""
