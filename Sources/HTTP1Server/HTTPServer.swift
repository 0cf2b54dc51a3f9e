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

    public init() {}
}

/// One line of the access log: everything about a request but its content.
public struct HTTPAccessRecord: Sendable {
    public var method: String
    public var path: String
    public var status: Int
    public var responseBytes: Int
    public var microseconds: Int
    public var requestID: String
    public var remoteAddress: String

    public init(method: String, path: String, status: Int, responseBytes: Int, microseconds: Int, requestID: String, remoteAddress: String) {
        self.method = method
        self.path = path
        self.status = status
        self.responseBytes = responseBytes
        self.microseconds = microseconds
        self.requestID = requestID
        self.remoteAddress = remoteAddress
    }
}

/// Why the server could not start, as one line (`bind 0.0.0.0:8080: Address already in use`).
public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// PLACEHOLDER API (the implementation replaces this body, keeping the signatures).
public final class HTTPServer: Sendable {
    public init(
        configuration: HTTPServerConfiguration,
        handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse,
        accessLog: (@Sendable (HTTPAccessRecord) -> Void)? = nil
    ) {}

    /// Binds, listens and starts serving in the background; returns the bound port.
    public func start() throws -> Int { throw HTTPServerError("not implemented") }

    /// Connections open right now (for metrics).
    public var openConnections: Int { 0 }

    /// Stops accepting, lets in-flight requests finish within the grace period, closes every connection.
    public func shutdown() {}

    /// Blocks until `shutdown()` has completed.
    public func waitUntilStopped() {}
}
