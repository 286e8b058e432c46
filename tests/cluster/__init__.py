"""A multi-host Flink or Spark cluster on one Linux machine, built from package registries only.

Each host (a Flink JobManager or TaskManager, a Spark master or worker) runs in its own network
namespace; each worker host also runs a Beam Python SDK worker pool; Beam's job server runs in
the root namespace, where beam-bpe submits to it. The cluster tests, the benchmarks and the
README's "Run on a cluster" use it through its command line (``python -m tests.cluster``, see
``__main__.py``). Needs root, iproute2, Java 17 and Maven.

    state.py       the state directory's layout
    install.py     Flink/Spark from PyPI, the job-server jars from Maven, the launcher jar
    network.py     namespaces, bridge, links, the JVMs' hosts file
    daemons.py     processes started in a namespace, known and stopped by PID
    flink.py       the Flink hosts: configuration, start, REST
    spark.py       the Spark hosts: configuration, start
    jobserver.py   Beam's job server (and why it starts through a launcher)
    sdk_pools.py   the SDK worker pools
"""
