import Dispatch

/// One thread that waits on an epoll set and runs the connections it was given: reads, writes, timeouts, and the
/// tasks other threads hand it with `execute`.
///
/// Dispatch read sources were the first design. On Linux each of their events passes through Dispatch's manager
/// thread (epoll, FIONREAD, a futex wake of a worker, two `epoll_ctl` re-arms and an eventfd round trip), which cost
/// more CPU per request than parsing and answering it. Here one thread does the `epoll_wait` and the work.
///
/// `connections` and everything a connection owns are confined to the loop's thread; that is what makes the
/// `@unchecked Sendable` sound. `pending` is the one thing other threads touch, under its lock.
final class EventLoop: @unchecked Sendable {
    private let poller: Poller
    private let pending = LockedState(PendingWork())
    private var connections: [Int32: HTTPConnection] = [:]

    private struct PendingWork {
        var tasks: [@Sendable () -> Void] = []
        var isStopping = false
    }

    /// How often connections check their deadlines (header, body and idle timeouts, lingering close).
    private static let sweepInterval: DispatchTimeInterval = .milliseconds(50)

    init() throws(SystemCallError) {
        poller = try Poller()
        try startThread { [self] in run() }
    }

    /// Any thread: runs `task` on the loop's thread, after the events it is handling now.
    func execute(_ task: @escaping @Sendable () -> Void) {
        let isFirst = pending.withLock { work in
            work.tasks.append(task)
            return work.tasks.count == 1
        }
        // Later tasks ride on the wake-up the first one sent.
        if isFirst { poller.wake() }
    }

    /// Any thread: the loop runs the tasks already handed to it, then its thread ends. Every connection is closed by
    /// then (the server stops its loops last).
    func stop() {
        pending.withLock { $0.isStopping = true }
        poller.wake()
    }

    // MARK: - Loop thread only

    func register(_ connection: HTTPConnection) throws(SystemCallError) {
        try poller.add(connection.descriptor, readable: true, writable: false)
        connections[connection.descriptor] = connection
    }

    func setInterest(_ connection: HTTPConnection, readable: Bool, writable: Bool) throws(SystemCallError) {
        try poller.modify(connection.descriptor, readable: readable, writable: writable)
    }

    /// Before the descriptor is closed.
    func deregister(_ connection: HTTPConnection) {
        poller.remove(connection.descriptor)
        connections[connection.descriptor] = nil
    }

    private func run() {
        var nextSweep = DispatchTime.now() + Self.sweepInterval
        while true {
            let timeout: Int32
            if connections.isEmpty {
                timeout = -1
            } else {
                let now = DispatchTime.now()
                timeout = nextSweep > now ? Int32((nextSweep.uptimeNanoseconds - now.uptimeNanoseconds) / 1_000_000) + 1 : 0
            }
            poller.wait(milliseconds: timeout) { event in
                connections[event.descriptor]?.handle(event)
            }
            let (tasks, isStopping) = pending.withLock { work in
                let tasks = work.tasks
                if !tasks.isEmpty { work.tasks = [] }
                return (tasks, work.isStopping)
            }
            for task in tasks { task() }
            if isStopping { return }
            let now = DispatchTime.now()
            if now >= nextSweep {
                nextSweep = now + Self.sweepInterval
                for connection in Array(connections.values) { connection.checkDeadline() }
            }
        }
    }
}
