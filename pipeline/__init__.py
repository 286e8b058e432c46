"""Drivers and the ``beam-bpe`` command line; they build Beam pipelines from transforms/.

    cli.py              the command line: each command's flags, and its run
    train/ encode/ pack/ decode/ prune/ report/
                        one folder per command, named as on the command line
    command_machinery/  what every command shares: outputs, dead letters, progress, runners, ...
    runtime/            start-up machinery: DirectRunner's, and the cluster hosts' worker pool
                        (BEAM_BPE_PLAIN_BEAM=1 turns it off)
    configs/            the ``--config`` presets (YAML)
"""
