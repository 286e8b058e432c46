package org.apache.flink.client.program.rest.retry;

/**
 * Takes the place of Flink's class of this name in the test cluster's Flink job server: it comes
 * first on the launcher's classpath (tests/cluster/jobserver.py). It sets the waits between a REST
 * client's polls, for a job's result above all.
 *
 * Why: Flink's REST client asks the JobManager for a job's result with waits of 10, 20, 40 ms...
 * up to 2 s (RestClusterClient fixes that strategy; no option changes it), and Beam's job server
 * learns that a job has ended only through it. A job's end so reached beam-bpe up to 2 s late,
 * 0.7 s in a 240 MB encode of 4 s. Polling every 100 ms throughout cost the JobManager and the job
 * server 8-10 ms of CPU a poll, a tenth of a core for as long as a job ran.
 *
 * So the waits double from the first, as Flink's do, up to 100 ms; from then on each wait is a
 * twentieth of the time waited so far, at least 100 ms and at most the caller's maximum. A job's
 * end is seen within 100 ms or 5% of its time, whichever is longer, and a long job is asked about
 * less and less often: 37 polls in its first 4 s, about 14 more each time its length doubles past
 * 2 s, one every 2 s after 40 s.
 */
public class ExponentialWaitStrategy implements WaitStrategy {
  private static final long FLOOR_MILLIS = 100;
  private static final long FRACTION = 20;

  private final long initialWait;
  private final long maxWait;

  public ExponentialWaitStrategy(final long initialWait, final long maxWait) {
    if (initialWait <= 0 || maxWait < initialWait) {
      throw new IllegalArgumentException(
          "waits must be positive and the first no longer than the last: " + initialWait + ", " + maxWait);
    }
    this.initialWait = initialWait;
    this.maxWait = maxWait;
  }

  @Override
  public long sleepTime(final long attempt) {
    if (attempt < 0) {
      throw new IllegalArgumentException("attempt must not be negative: " + attempt);
    }
    long floor = Math.max(initialWait, Math.min(FLOOR_MILLIS, maxWait));
    long waited = 0;
    long wait = 0;
    // Attempt by attempt; once a wait reaches the maximum every later one is the maximum, and
    // that takes under a hundred attempts (each wait at least 5% of the time waited so far).
    for (long i = 0; i <= attempt && wait < maxWait; i++) {
      long doubling = i < 62 && initialWait <= (floor >> i) ? initialWait << i : floor;  // at most the floor
      wait = Math.min(maxWait, Math.max(doubling, waited / FRACTION));
      waited += wait;
    }
    return wait;
  }
}
