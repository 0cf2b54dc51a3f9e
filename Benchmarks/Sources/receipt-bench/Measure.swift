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

/// How many calls of `body` take about `seconds`.
func calibrate(seconds: Double, _ body: () -> Int) -> (calls: Int, sink: Int) {
    var sink = 0
    var calls = 1
    while true {
        let start = nanoseconds()
        for _ in 0..<calls { sink &+= body() }
        let elapsed = Double(nanoseconds() - start) / 1e9
        if elapsed >= seconds / 4 { return (max(1, Int(Double(calls) * seconds / elapsed)), sink) }
        calls *= 2
    }
}

/// Nanoseconds per call of each body: the median of `rounds` samples of about `sampleSeconds` each. The bodies
/// take turns within every round, so a noisy moment on the machine touches all of them alike and their ratios
/// hold even when absolute times drift.
///
/// Each body returns something derived from its work so the optimizer cannot drop it; the sum is returned.
func measureInterleaved(rounds: Int = 7, sampleSeconds: Double, _ bodies: [() -> Int]) -> (nanoseconds: [Double], sink: Int) {
    var sink = 0
    var calls: [Int] = []
    for body in bodies {
        let (count, consumed) = calibrate(seconds: sampleSeconds, body)
        calls.append(count)
        sink &+= consumed
    }
    var samples = [[Double]](repeating: [], count: bodies.count)
    for _ in 0..<rounds {
        for (index, body) in bodies.enumerated() {
            let start = nanoseconds()
            for _ in 0..<calls[index] { sink &+= body() }
            samples[index].append(Double(nanoseconds() - start) / Double(calls[index]))
        }
    }
    return (samples.map { $0.sorted()[$0.count / 2] }, sink)
}
