/// At most `limit` pieces of work at once, each on a thread of its own that ends with it.
///
/// For handlers that wait long on something outside the process. Dispatch's pool grows by about a thread a second
/// while its threads are blocked, so handlers that hang there starve every other request; these threads are apart,
/// and their number is the bound. A thread per piece of work rather than a pool of idle ones: the work waits far
/// longer than a thread takes to start, and nothing is left running when the server stops.
public final class BoundedThreads: Sendable {
    public let limit: Int
    private let running = LockedState(0)

    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// How many threads are running work now.
    public var count: Int { running.withLock { $0 } }

    /// Starts `work` on a thread of its own, or returns false at once when `limit` are already running.
    func tryRun(_ work: @escaping @Sendable () -> Void) -> Bool {
        let admitted = running.withLock { count in
            guard count < limit else { return false }
            count += 1
            return true
        }
        guard admitted else { return false }
        do {
            try startThread { [running] in
                work()
                running.withLock { $0 -= 1 }
            }
            return true
        } catch {
            running.withLock { $0 -= 1 }
            return false
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
