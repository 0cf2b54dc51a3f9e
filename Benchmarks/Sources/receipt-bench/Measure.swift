#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Monotonic nanoseconds.
func nanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// Nanoseconds per call: the median of `samples` runs of about `sampleSeconds` each, after one warm-up run.
///
/// `body` returns something derived from its work (a byte count, a flag) so the optimizer cannot drop the work;
/// the sum is returned beside the time and printed nowhere but must be consumed by the caller.
func measure(samples: Int = 5, sampleSeconds: Double, _ body: () -> Int) -> (nanoseconds: Double, sink: Int) {
    var sink = 0
    // Calibrate: how many calls fill one sample.
    var calls = 1
    while true {
        let start = nanoseconds()
        for _ in 0..<calls { sink &+= body() }
        let elapsed = Double(nanoseconds() - start) / 1e9
        if elapsed >= sampleSeconds / 4 {
            calls = max(1, Int(Double(calls) * sampleSeconds / elapsed))
            break
        }
        calls *= 2
    }
    var perCall: [Double] = []
    for _ in 0..<samples {
        let start = nanoseconds()
        for _ in 0..<calls { sink &+= body() }
        perCall.append(Double(nanoseconds() - start) / Double(calls))
    }
    perCall.sort()
    return (perCall[perCall.count / 2], sink)
}
