import Dispatch
package import HTTP1Server

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// The server's log lines on their way to a stream that may stop reading: a bounded queue that one thread of its own
/// drains.
///
/// A `write(2)` to a full pipe blocks, and a stdout nobody read froze both event loops (`/healthz` included) after
/// about 970 requests. So whoever logs only appends under a lock held for the append, and never waits: when the
/// queue is full, in lines or in bytes, the line is dropped and `lineDropped` is told. Only the writer thread writes,
/// a batch of whole lines per call, so lines keep their order and never interleave.
///
/// The writer is woken by the first line after a quiet spell, which it writes at once; then it naps for
/// `Limits.batchInterval` and writes whatever came meanwhile in one batch, and sleeps until woken only after a nap
/// that brought nothing. Under load that is one wake-up and one write per interval, not per request: woken for each
/// line, it cost every request futex calls and a context switch that preempted an event loop (BENCHMARKS.md). A nap
/// is cut short only when the queue passes half full, so a burst is written before it is dropped, or by `flush`.
///
/// The writer thread ends once its queue is released and emptied (a line appended through `sink` after that is never
/// written); a writer blocked on a stream that never reads again is left to the process's exit.
package final class LogLineQueue: Sendable {
    /// How much may wait for the stream, and how long a line may wait while more arrive. Bytes count each line's
    /// newline.
    package struct Limits: Sendable {
        package var lines: Int
        package var bytes: Int
        package var batchInterval: Duration

        /// Several seconds of access log at a few hundred requests a second, on top of the 64 KiB a pipe holds: a log
        /// shipper's hiccup loses nothing, a stalled one costs at most 1 MiB of memory. Five milliseconds gather
        /// about a hundred lines at full speed, and delay a line by no more than a reader could notice.
        package static let standard = Limits(lines: 4_096, bytes: 1 << 20, batchInterval: .milliseconds(5))

        package init(lines: Int, bytes: Int, batchInterval: Duration = .milliseconds(5)) {
            self.lines = lines
            self.bytes = bytes
            self.batchInterval = batchInterval
        }
    }

    private let shared: SharedQueue

    /// Starts the writer thread.
    ///
    /// - Parameters:
    ///   - write: writes one batch of whole lines, each ending in a newline; may block, and only the writer calls it.
    ///   - lineDropped: called once per line refused because the queue was full; must not block.
    package init(
        limits: Limits = .standard, write: @escaping @Sendable ([UInt8]) -> Void,
        lineDropped: @escaping @Sendable () -> Void
    ) throws(SystemCallError) {
        let shared = SharedQueue(limits: limits, write: write, lineDropped: lineDropped)
        try startThread { shared.drain() }
        self.shared = shared
    }

    deinit {
        shared.close()
    }

    /// Queues one line (without its newline), or drops and counts it when the queue is full. Never blocks on the
    /// stream.
    package func append(_ line: String) {
        shared.append(line)
    }

    /// `append` as a `ServiceLog` sink.
    package var sink: LogSink {
        { [shared] line in shared.append(line) }
    }

    /// Waits until every line queued so far has been written (the queue empty, its writer idle), or `timeout` has
    /// passed: for the lines before exit, which must reach the terminal unless the stream has stalled.
    ///
    /// - Returns: whether everything was written in time.
    @discardableResult
    package func flush(timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        shared.hurry()
        while !shared.isIdle {
            guard ContinuousClock.now < deadline else { return false }
            // Only at exit, so a short poll beats a second condition the writer would signal on every batch.
            usleep(1_000)
        }
        return true
    }
}

/// What the writer thread and the loggers share; the thread holds this, not the `LogLineQueue`, so that releasing the
/// queue ends the thread.
private final class SharedQueue: Sendable {
    private enum Writer {
        /// Taking lines or writing them.
        case awake
        /// Waiting out `batchInterval` after a write so that lines gather; woken early only past half full.
        case napping
        /// The queue was empty after a nap: waiting for the next line, which wakes it.
        case asleep
    }

    private struct State {
        var lines: [String] = []
        var bytes = 0
        var writer = Writer.awake
        var isWriting = false
        /// Asked, while awake, to skip the next nap: the queue is to be emptied now.
        var isHurried = false
        var isClosed = false
    }

    private let limits: LogLineQueue.Limits
    private let napTime: DispatchTimeInterval
    private let write: @Sendable ([UInt8]) -> Void
    private let lineDropped: @Sendable () -> Void
    private let state = LockedState(State())
    private let wake = DispatchSemaphore(value: 0)

    init(
        limits: LogLineQueue.Limits, write: @escaping @Sendable ([UInt8]) -> Void,
        lineDropped: @escaping @Sendable () -> Void
    ) {
        self.limits = limits
        let (seconds, attoseconds) = limits.batchInterval.components
        napTime = .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
        self.write = write
        self.lineDropped = lineDropped
    }

    var isIdle: Bool {
        state.withLock { $0.lines.isEmpty && !$0.isWriting }
    }

    private func isHalfFull(_ state: State) -> Bool {
        2 * state.lines.count >= limits.lines || 2 * state.bytes >= limits.bytes
    }

    func append(_ line: String) {
        let size = line.utf8.count + 1
        let limits = self.limits
        let accepted: (queued: Bool, wakeWriter: Bool) = state.withLock { state in
            guard state.lines.count < limits.lines, state.bytes + size <= limits.bytes else { return (false, false) }
            state.lines.append(line)
            state.bytes += size
            let wakeWriter: Bool
            switch state.writer {
            case .awake: wakeWriter = false
            case .napping: wakeWriter = isHalfFull(state)
            case .asleep: wakeWriter = true
            }
            // One signal per wake-up: the writer takes everything queued when it runs.
            if wakeWriter { state.writer = .awake }
            return (true, wakeWriter)
        }
        if !accepted.queued { lineDropped() }
        if accepted.wakeWriter { wake.signal() }
    }

    /// Has what is queued written now rather than after the writer's nap.
    func hurry() {
        let wakeWriter = state.withLock { state in
            guard state.writer != .awake else {
                state.isHurried = true
                return false
            }
            state.writer = .awake
            return true
        }
        if wakeWriter { wake.signal() }
    }

    func close() {
        state.withLock { $0.isClosed = true }
        hurry()
    }

    /// The writer thread's whole life: sleep until a line comes, write it, then nap and write what came meanwhile,
    /// until a nap brings nothing.
    func drain() {
        var batch: [UInt8] = []
        while true {
            let lines: [String]? = state.withLock { state in
                if state.lines.isEmpty {
                    if state.isClosed { return nil }
                    state.writer = .asleep
                    return []
                }
                state.writer = .awake
                state.isWriting = true
                defer {
                    state.lines = []
                    state.bytes = 0
                }
                return state.lines
            }
            guard let lines else { return }
            if lines.isEmpty {
                wake.wait()
                continue
            }
            batch.removeAll(keepingCapacity: true)
            for line in lines {
                batch.append(contentsOf: line.utf8)
                batch.append(UInt8(ascii: "\n"))
            }
            write(batch)
            let naps = state.withLock { state in
                state.isWriting = false
                defer { state.isHurried = false }
                guard !state.isClosed, !state.isHurried, !isHalfFull(state) else { return false }
                state.writer = .napping
                return true
            }
            // A signal that comes after the timeout stays in the semaphore and ends the next wait at once: one more
            // turn of the loop, never a line left behind.
            if naps { _ = wake.wait(timeout: .now() + napTime) }
        }
    }
}
