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
/// The writer thread ends once its queue is released and emptied (a line appended through `sink` after that is never
/// written); a writer blocked on a stream that never reads again is left to the process's exit.
package final class LogLineQueue: Sendable {
    /// How much may wait for the stream. Bytes count each line's newline.
    package struct Limits: Sendable {
        package var lines: Int
        package var bytes: Int

        /// Several seconds of access log at a few hundred requests a second, on top of the 64 KiB a pipe holds: a log
        /// shipper's hiccup loses nothing, a stalled one costs at most 1 MiB of memory.
        package static let standard = Limits(lines: 4_096, bytes: 1 << 20)

        package init(lines: Int, bytes: Int) {
            self.lines = lines
            self.bytes = bytes
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
    private struct State {
        var lines: [String] = []
        var bytes = 0
        var isWriterAsleep = false
        var isWriting = false
        var isClosed = false
    }

    private let limits: LogLineQueue.Limits
    private let write: @Sendable ([UInt8]) -> Void
    private let lineDropped: @Sendable () -> Void
    private let state = LockedState(State())
    private let wake = DispatchSemaphore(value: 0)

    init(
        limits: LogLineQueue.Limits, write: @escaping @Sendable ([UInt8]) -> Void,
        lineDropped: @escaping @Sendable () -> Void
    ) {
        self.limits = limits
        self.write = write
        self.lineDropped = lineDropped
    }

    var isIdle: Bool {
        state.withLock { $0.lines.isEmpty && !$0.isWriting }
    }

    func append(_ line: String) {
        let size = line.utf8.count + 1
        let limits = self.limits
        let accepted: (queued: Bool, wakeWriter: Bool) = state.withLock { state in
            guard state.lines.count < limits.lines, state.bytes + size <= limits.bytes else { return (false, false) }
            state.lines.append(line)
            state.bytes += size
            // A semaphore signal per line would be a futex call per request while the writer sleeps; one per wake-up
            // is enough, since the writer takes everything queued when it runs.
            let wakeWriter = state.isWriterAsleep
            state.isWriterAsleep = false
            return (true, wakeWriter)
        }
        if !accepted.queued { lineDropped() }
        if accepted.wakeWriter { wake.signal() }
    }

    func close() {
        let wakeWriter = state.withLock { state in
            state.isClosed = true
            defer { state.isWriterAsleep = false }
            return state.isWriterAsleep
        }
        if wakeWriter { wake.signal() }
    }

    /// The writer thread's whole life.
    func drain() {
        var batch: [UInt8] = []
        while true {
            let lines: [String]? = state.withLock { state in
                state.isWriting = false
                if state.lines.isEmpty {
                    if state.isClosed { return nil }
                    state.isWriterAsleep = true
                    return []
                }
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
        }
    }
}
