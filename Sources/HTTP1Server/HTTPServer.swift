import Dispatch

internal import Glibc

/// Limits and timeouts; every default is safe for a server that faces the internet.
public struct HTTPServerConfiguration: Sendable {
    public var host: String = "127.0.0.1"
    /// 0 picks a free port; `HTTPServer.start()` returns the one bound.
    public var port: Int = 8080
    public var maxBodyBytes: Int = 4 * 1024 * 1024 + 64 * 1024
    public var maxHeaderBytes: Int = 16 * 1024
    public var maxConnections: Int = 1024
    /// Seconds to receive a request's head once its first byte came (slow-loris).
    public var headerReadTimeout: Double = 10
    /// Seconds to receive the body once the head is complete.
    public var bodyReadTimeout: Double = 30
    /// Seconds an idle keep-alive connection stays open.
    public var idleTimeout: Double = 60
    /// Seconds `shutdown` waits for in-flight requests.
    public var shutdownGracePeriod: Double = 10
    /// Requests whose body is at most this many bytes run the handler on the connection's event loop rather than
    /// the handler queue, which saves two thread hand-offs per request. Only for handlers that are CPU-bound and
    /// quick on small requests: while one runs, the other connections sharing its loop wait. nil, the default, sends
    /// every request to the handler queue.
    public var inlineHandlingMaxBodyBytes: Int?
    /// Further says which requests under that size may run inline: a handler that may wait (on a database, say)
    /// answers `false` for them. nil allows every one.
    public var mayHandleInline: (@Sendable (HTTPRequest) -> Bool)?
    /// Requests that may wait on something outside the process run in the first of these lanes that accepts them,
    /// never inline nor on the handler queue, so they cannot hold up the rest. Empty sends none there.
    public var waitingLanes: [HandlerLane] = []

    public init() {}
}

/// One line of the access log: everything about a request but its content.
public struct HTTPAccessRecord: Sendable {
    public var method: String
    public var path: String
    public var status: HTTPStatus
    public var responseBytes: Int
    public var microseconds: Int
    public var requestID: String
    public var remoteAddress: String
    /// Who the application says made the request (the response's `authenticatedUser`): a name, never a credential.
    public var user: String?

    public init(
        method: String, path: String, status: HTTPStatus, responseBytes: Int, microseconds: Int, requestID: String,
        remoteAddress: String, user: String? = nil
    ) {
        self.method = method
        self.path = path
        self.status = status
        self.responseBytes = responseBytes
        self.microseconds = microseconds
        self.requestID = requestID
        self.remoteAddress = remoteAddress
        self.user = user
    }
}

/// Why the server could not start, as one line (`bind 0.0.0.0:8080: Address already in use`).
public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// An HTTP/1.1 server on POSIX sockets and Dispatch.
///
/// Connections are spread over a few event loops (one thread and epoll set per core) that move bytes; the handler
/// runs on a concurrent Dispatch queue, so CPU-bound handlers use every core and never stall socket handling, except
/// requests small enough for `inlineHandlingMaxBodyBytes`, handled where they were read. Responses on a connection
/// go out in request order.
public final class HTTPServer: Sendable {
    let configuration: HTTPServerConfiguration
    let handler: @Sendable (HTTPRequest) -> HTTPResponse
    let failureResponse: @Sendable (HTTPFailure) -> HTTPResponse
    private let accessLog: (@Sendable (HTTPAccessRecord) -> Void)?
    let handlerQueue = DispatchQueue(label: "HTTP1Server.handler", qos: .userInitiated, attributes: .concurrent)
    private let acceptQueue = DispatchQueue(label: "HTTP1Server.accept", qos: .userInitiated)
    private let state = LockedState(State())
    private let stopped = DispatchGroup()

    /// Connections over the limit still get a 503 (not a silent hang); past this many at once, just a close.
    private static let maxRejectedConnections = 64

    private enum Phase {
        case idle, running, stopping, stopped
    }

    private struct State {
        var phase = Phase.idle
        var listener: (any DispatchSourceRead)?
        var isListenerClosed = true
        var isListenerPaused = false
        var connections: [ObjectIdentifier: HTTPConnection] = [:]
        var servedCount = 0
        var rejectedCount = 0
        var loops: [EventLoop] = []
        var nextLoop = 0

        mutating func finishStoppingIfDone() -> Bool {
            guard phase == .stopping, isListenerClosed, connections.isEmpty else { return false }
            phase = .stopped
            for loop in loops { loop.stop() }
            loops = []
            return true
        }
    }

    /// - Parameters:
    ///   - handler: called for every complete request, on a concurrent queue; may block (the connection waits),
    ///     unless it runs inline on an event loop (`inlineHandlingMaxBodyBytes`).
    ///   - failureResponse: words the answer to a request the server refuses before any handler sees it (malformed,
    ///     too large, too slow, too many connections), in the application's own error shape; plain text by default.
    ///   - accessLog: called once per response, with no header, body or query string in it.
    public init(
        configuration: HTTPServerConfiguration,
        handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse,
        failureResponse: @escaping @Sendable (HTTPFailure) -> HTTPResponse = HTTPServer.plainTextResponse,
        accessLog: (@Sendable (HTTPAccessRecord) -> Void)? = nil
    ) {
        self.configuration = configuration
        self.handler = handler
        self.failureResponse = failureResponse
        self.accessLog = accessLog
    }

    @Sendable public static func plainTextResponse(to failure: HTTPFailure) -> HTTPResponse {
        HTTPResponse(
            status: failure.status, headers: HTTPHeaders([(.contentType, "text/plain; charset=utf-8")]),
            body: Array((failure.message + "\n").utf8))
    }

    /// Binds, listens and starts serving in the background; returns the bound port.
    /// - Throws: `HTTPServerError` such as `bind 127.0.0.1:8080: Address already in use`.
    public func start() throws -> Int {
        // A peer that resets while we write must be an error, not the end of the process.
        signal(SIGPIPE, SIG_IGN)
        return try state.withLock { state in
            guard state.phase == .idle else { throw HTTPServerError("server already started") }
            let cores = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
            var loops: [EventLoop] = []
            do {
                for _ in 0..<cores { loops.append(try EventLoop()) }
            } catch {
                for loop in loops { loop.stop() }
                throw HTTPServerError("event loop: \(error)")
            }
            let listener: (descriptor: Int32, port: Int, listener: HTTPListener)
            do {
                listener = try Socket.listen(host: configuration.host, port: configuration.port, backlog: 1024)
            } catch {
                for loop in loops { loop.stop() }
                throw error
            }
            let source = DispatchSource.makeReadSource(fileDescriptor: listener.descriptor, queue: acceptQueue)
            source.setEventHandler { [self] in self.acceptConnections(listener.descriptor, as: listener.listener) }
            source.setCancelHandler { [self] in
                closeDescriptor(listener.descriptor)
                self.listenerClosed()
            }
            state.phase = .running
            state.loops = loops
            state.listener = source
            state.isListenerClosed = false
            stopped.enter()
            source.activate()
            return listener.port
        }
    }

    /// Connections open right now (for metrics); connections refused with 503 do not count.
    public var openConnections: Int { state.withLock { $0.servedCount } }

    /// Stops accepting, lets in-flight requests finish within the grace period, closes every connection.
    /// Idle connections close at once. Idempotent; returns without waiting (see `waitUntilStopped`).
    public func shutdown() {
        let connections: [HTTPConnection]? = state.withLock { state in
            switch state.phase {
            case .idle:
                state.phase = .stopped
                return nil
            case .stopping, .stopped:
                return nil
            case .running:
                state.phase = .stopping
                if state.isListenerPaused {
                    // A suspended source never runs its cancel handler.
                    state.isListenerPaused = false
                    state.listener?.resume()
                }
                state.listener?.cancel()
                state.listener = nil
                return Array(state.connections.values)
            }
        }
        guard let connections else { return }
        for connection in connections { connection.beginShutdown() }
        DispatchQueue.global().asyncAfter(deadline: .now() + configuration.shutdownGracePeriod) { [self] in
            let remaining = state.withLock { Array($0.connections.values) }
            for connection in remaining { connection.forceClose() }
        }
    }

    /// Blocks until `shutdown()` has completed: listener closed and every connection closed.
    public func waitUntilStopped() {
        stopped.wait()
    }

    // MARK: - Internals

    var isStopping: Bool { state.withLock { $0.phase != .running } }

    private func acceptConnections(_ descriptor: Int32, as listener: HTTPListener) {
        while true {
            let accepted: (descriptor: Int32, peer: HTTPPeer)
            do {
                guard case .processed(let connection) = try Socket.accept(descriptor) else { return }
                accepted = connection
            } catch {
                switch error.errno {
                case ECONNABORTED, EPROTO:
                    continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: the listener stays readable, so pause instead of spinning.
                    pauseAccepting()
                    return
                default:
                    return
                }
            }
            let connection: HTTPConnection? = state.withLock { state in
                guard state.phase == .running else { return nil }
                let isRejected = state.servedCount >= configuration.maxConnections
                if isRejected {
                    guard state.rejectedCount < Self.maxRejectedConnections else { return nil }
                    state.rejectedCount += 1
                } else {
                    state.servedCount += 1
                }
                let loop = state.loops[state.nextLoop % state.loops.count]
                state.nextLoop &+= 1
                let connection = HTTPConnection(
                    descriptor: accepted.descriptor, peer: accepted.peer, listener: listener, loop: loop, server: self,
                    isRejected: isRejected
                )
                state.connections[ObjectIdentifier(connection)] = connection
                return connection
            }
            guard let connection else {
                closeDescriptor(accepted.descriptor)
                continue
            }
            connection.start()
        }
    }

    private func pauseAccepting() {
        state.withLock { state in
            guard let listener = state.listener, !state.isListenerPaused else { return }
            state.isListenerPaused = true
            listener.suspend()
        }
        acceptQueue.asyncAfter(deadline: .now() + 0.1) { [self] in
            state.withLock { state in
                guard let listener = state.listener, state.isListenerPaused else { return }
                state.isListenerPaused = false
                listener.resume()
            }
        }
    }

    func connectionClosed(_ connection: HTTPConnection) {
        let isStopped = state.withLock { state in
            guard state.connections.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return false }
            if connection.isRejected { state.rejectedCount -= 1 } else { state.servedCount -= 1 }
            return state.finishStoppingIfDone()
        }
        if isStopped { stopped.leave() }
    }

    private func listenerClosed() {
        let isStopped = state.withLock { state in
            state.isListenerClosed = true
            return state.finishStoppingIfDone()
        }
        if isStopped { stopped.leave() }
    }

    func log(
        method: String, path: String, status: HTTPStatus, bytes: Int, started: DispatchTime, requestID: String,
        peer: String, user: String? = nil
    ) {
        guard let accessLog else { return }
        let elapsed = DispatchTime.now().uptimeNanoseconds &- started.uptimeNanoseconds
        accessLog(
            HTTPAccessRecord(
                method: method, path: path, status: status, responseBytes: bytes, microseconds: Int(elapsed / 1000),
                requestID: requestID, remoteAddress: peer, user: user
            )
        )
    }
}
