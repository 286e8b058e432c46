package org.apache.flink.client.program.rest.retry;

/**
 * Takes the place of Flink's class of this name in the test cluster's Flink job server: it comes
 * first on the launcher's classpath (tests/cluster/jobserver.py). Waits between polls double from
 * the first wait, as Flink's do, but stop growing at 100 ms instead of at the caller's maximum.
 *
 * Why: Flink's REST client asks the JobManager for a job's result with waits of 10, 20, 40 ms...
 * up to 2 s (RestClusterClient fixes that strategy; no option changes it), and Beam's job server
 * learns that a job has ended only through it. A job's end so reached beam-bpe up to 2 s late,
 * 0.7 s in a 240 MB encode of 4 s. At 100 ms the client asks the JobManager ten times a second
 * while a job runs, a few milliseconds of its CPU per second.
 * -Dbeam.launcher.maxPollMillis=N sets another ceiling.
 */
public class ExponentialWaitStrategy implements WaitStrategy {
  private static final long CEILING = Long.getLong("beam.launcher.maxPollMillis", 100L);

  private final long initialWait;
  private final long maxWait;

  public ExponentialWaitStrategy(final long initialWait, final long maxWait) {
    if (initialWait <= 0 || maxWait < initialWait) {
      throw new IllegalArgumentException(
          "waits must be positive and the first no longer than the last: " + initialWait + ", " + maxWait);
    }
    this.initialWait = initialWait;
    this.maxWait = Math.max(initialWait, Math.min(maxWait, CEILING));
  }

  @Override
  public long sleepTime(final long attempt) {
    if (attempt < 0) {
      throw new IllegalArgumentException("attempt must not be negative: " + attempt);
    }
    // initialWait * 2^attempt, without overflowing for a long-running job's many attempts.
    if (attempt >= 62 || initialWait > (maxWait >> attempt)) {
      return maxWait;
    }
    return Math.min(initialWait << attempt, maxWait);
  }
}
