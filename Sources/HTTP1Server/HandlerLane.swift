internal import Dispatch

/// At most `limit` pieces of work at once, each on a thread of its own.
///
/// For handlers that wait long on something outside the process. Dispatch's pool grows by about a thread a second
/// while its threads are blocked, so handlers that hang there starve every other request, and handlers that wait a
/// few milliseconds each (on a commit) are held to about as many at once as there are cores; these threads are
/// apart, and their number is the bound. A thread whose work ended waits `idleSeconds` for the next piece before it
/// ends: starting one costs tens of microseconds, which a lane taking a thousand writes a second would pay each time.
public final class BoundedThreads: Sendable {
    public let limit: Int
    static let idleSeconds = 5.0
    private let state = LockedState(State())

    private struct State {
        var busy = 0
        var idle: [IdleThread] = []
    }

    /// A thread between two pieces of work; `work` is set, under the state's lock, by whoever hands it the next.
    private final class IdleThread: @unchecked Sendable {
        let wake = DispatchSemaphore(value: 0)
        var work: (@Sendable () -> Void)?
    }

    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// How many threads are running work now (not those waiting idle for more).
    public var count: Int { state.withLock { $0.busy } }

    /// Runs `work` on an idle thread or a new one, or returns false at once when `limit` are already busy.
    package func tryRun(_ work: @escaping @Sendable () -> Void) -> Bool {
        enum Admission { case refused, handed(IdleThread), start }
        let admission = state.withLock { state -> Admission in
            guard state.busy < limit else { return .refused }
            state.busy += 1
            guard let idle = state.idle.popLast() else { return .start }
            idle.work = work
            return .handed(idle)
        }
        switch admission {
        case .refused:
            return false
        case .handed(let idle):
            idle.wake.signal()
            return true
        case .start:
            do {
                try startThread { [self] in runUntilIdleTooLong(work) }
                return true
            } catch {
                state.withLock { $0.busy -= 1 }
                return false
            }
        }
    }

    private func runUntilIdleTooLong(_ first: @escaping @Sendable () -> Void) {
        let me = IdleThread()
        var next: (@Sendable () -> Void)? = first
        while let work = next {
            work()
            state.withLock { state in
                state.busy -= 1
                me.work = nil
                state.idle.append(me)
            }
            if me.wake.wait(timeout: .now() + Self.idleSeconds) == .timedOut {
                let handedWork = state.withLock { state -> Bool in
                    guard let index = state.idle.firstIndex(where: { $0 === me }) else { return true }
                    state.idle.remove(at: index)
                    return false
                }
                guard handedWork else { return }
                // Work was handed over between the timeout and the lock: its signal is on its way.
                me.wake.wait()
            }
            next = state.withLock { _ in me.work }
        }
    }
}

/// Requests that run apart from the handler queue: the ones `accepts` picks run on `threads`, and when all of those
/// are taken, `busyHandler` answers at once instead (on the handler queue, so it may still read a database).
public struct HandlerLane: Sendable {
    public var threads: BoundedThreads
    /// Called on the event loop: must be quick and never block.
    public var accepts: @Sendable (HTTPRequest) -> Bool
    public var busyHandler: @Sendable (HTTPRequest) -> HTTPResponse

    public init(
        threads: BoundedThreads, accepts: @escaping @Sendable (HTTPRequest) -> Bool,
        busyHandler: @escaping @Sendable (HTTPRequest) -> HTTPResponse
    ) {
        self.threads = threads
        self.accepts = accepts
        self.busyHandler = busyHandler
    }
}
