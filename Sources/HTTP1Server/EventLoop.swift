import Dispatch

/// A few threads that wait on one shared epoll set and run whichever connection is ready next: reads, writes, and the
/// sweep of timeouts.
///
/// Dispatch read sources were the first design. On Linux each of their events passes through Dispatch's manager
/// thread (epoll, FIONREAD, a futex wake of a worker, two `epoll_ctl` re-arms and an eventfd round trip), which cost
/// more CPU per request than parsing and answering it. Here the thread that returns from `epoll_wait` does the work.
///
/// One set for all threads rather than one per thread: with connections fixed to a thread, a thread that was
/// preempted (the clients share the cores) or simply had more ready connections left its connections waiting while
/// another thread idled, which made the slowest percent of requests wait 2.5x the median. From one set, the next free
/// thread takes the connection that became ready first. Each registration is `EPOLLONESHOT`, so a connection is
/// reported to one thread at a time until that thread re-arms it; each thread asks for few events at once, so none
/// holds ready connections it cannot start on yet.
///
/// Threads share only `registry`, under its lock; a connection guards its own state (see `HTTPConnection`).
final class EventLoop: @unchecked Sendable {
    private let poller: Poller
    private let registry = LockedState(Registry())

    private struct Registry {
        /// By token rather than descriptor: an event still in another thread's hands for a connection that closed
        /// must not reach a newer connection the kernel gave the same descriptor number.
        var connections: [UInt64: HTTPConnection] = [:]
        var nextToken: UInt64 = 1
        var nextSweep = DispatchTime.now()
        var isStopping = false
    }

    /// How often connections check their deadlines (header, body and idle timeouts, lingering close).
    private static let sweepInterval: DispatchTimeInterval = .milliseconds(50)
    /// Events one thread takes per wait: few, so that a ready connection waits for the next free thread rather than
    /// behind the ones a busy thread already took.
    private static let eventsPerWait = 4

    init(threads: Int) throws(SystemCallError) {
        poller = try Poller()
        for _ in 0..<max(1, threads) {
            do {
                try startThread { [self] in run() }
            } catch {
                stop()
                throw error
            }
        }
    }

    /// Any thread: every loop thread ends after the events it is handling now. Every connection is closed by then
    /// (the server stops its loop last).
    func stop() {
        registry.withLock { $0.isStopping = true }
        poller.wake()
    }

    /// Any thread, under the connection's lock: watches the connection's descriptor, armed for one event.
    func register(_ connection: HTTPConnection, readable: Bool, writable: Bool) throws(SystemCallError) -> UInt64 {
        let (token, wasIdle) = registry.withLock { registry in
            let token = registry.nextToken
            registry.nextToken += 1
            let wasIdle = registry.connections.isEmpty
            registry.connections[token] = connection
            return (token, wasIdle)
        }
        do {
            try poller.add(connection.descriptor, token: token, readable: readable, writable: writable)
        } catch {
            registry.withLock { $0.connections[token] = nil }
            throw error
        }
        // Threads with no connection wait without a timeout; one of them must now start sweeping.
        if wasIdle { poller.wake() }
        return token
    }

    /// Under the connection's lock: arms the registration for one more event.
    func arm(_ connection: HTTPConnection, token: UInt64, readable: Bool, writable: Bool) throws(SystemCallError) {
        try poller.modify(connection.descriptor, token: token, readable: readable, writable: writable)
    }

    /// Under the connection's lock, before the descriptor is closed.
    func deregister(_ connection: HTTPConnection, token: UInt64) {
        poller.remove(connection.descriptor)
        registry.withLock { $0.connections[token] = nil }
    }

    private func run() {
        var events = PollEvents(capacity: Self.eventsPerWait)
        while true {
            let timeout: Int32? = registry.withLock { registry in
                if registry.isStopping { return nil }
                if registry.connections.isEmpty { return -1 }
                let now = DispatchTime.now()
                guard registry.nextSweep > now else { return 0 }
                return Int32((registry.nextSweep.uptimeNanoseconds - now.uptimeNanoseconds) / 1_000_000) + 1
            }
            guard let timeout else {
                // A wake-up reaches one waiting thread; each passes it on to the next as it ends.
                poller.wake()
                return
            }
            poller.wait(milliseconds: timeout, into: &events)
            for event in events.ready {
                let connection = registry.withLock { $0.connections[event.token] }
                connection?.handle(event)
            }
            let due: [HTTPConnection] = registry.withLock { registry in
                let now = DispatchTime.now()
                guard !registry.connections.isEmpty, now >= registry.nextSweep else { return [] }
                registry.nextSweep = now + Self.sweepInterval
                return Array(registry.connections.values)
            }
            for connection in due { connection.checkDeadline() }
        }
    }
}
