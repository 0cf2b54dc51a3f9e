// Linux only: epoll, eventfd, accept4, and the socket constants spelled the Glibc way.
internal import CEpoll
internal import Glibc

/// A failed system call: its name and `errno`.
package struct SystemCallError: Error, CustomStringConvertible {
    package var call: String
    package var errno: Int32

    package var description: String { "\(call): \(String(cString: strerror(errno)))" }
}

/// The outcome of a call on a non-blocking descriptor.
enum IOResult<Value> {
    case processed(Value)
    case wouldBlock
}

/// Every system call goes through here: retries `EINTR`, turns `-1` into an error carrying `errno` and the call's
/// name, and, for non-blocking descriptors, reports `EAGAIN` as `.wouldBlock` rather than as an error.
@inline(__always)
func syscall<Value: FixedWidthInteger>(
    _ call: @autoclosure () -> String,
    nonBlocking: Bool = false,
    _ body: () -> Value
) throws(SystemCallError) -> IOResult<Value> {
    while true {
        let result = body()
        guard result == -1 else { return .processed(result) }
        let error = errno
        switch error {
        case EINTR: continue
        case EAGAIN where nonBlocking, EWOULDBLOCK where nonBlocking: return .wouldBlock
        default: throw SystemCallError(call: call(), errno: error)
        }
    }
}

/// A blocking-style call: `EAGAIN` is an error too. The one `EINTR` loop of every module that may depend on this one
/// (the service's standard streams, `receiptd`'s notification delivery); the ledger, which depends on no Swift
/// module, keeps its own line.
@inline(__always)
@discardableResult
package func syscall<Value: FixedWidthInteger>(
    _ call: @autoclosure () -> String,
    _ body: () -> Value
) throws(SystemCallError) -> Value {
    switch try syscall(call(), nonBlocking: false, body) {
    case .processed(let value): return value
    case .wouldBlock: throw SystemCallError(call: call(), errno: EAGAIN)
    }
}

/// Closes without retrying: on Linux the descriptor is gone even when `close` reports `EINTR`, and a retry could
/// close a descriptor another thread just opened.
func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}

enum Socket {
    /// Reads up to `maximum` bytes that are available; an empty array is end of input.
    static func read(_ descriptor: Int32, maximum: Int) throws(SystemCallError) -> IOResult<[UInt8]> {
        var outcome: Result<IOResult<Int>, SystemCallError> = .success(.wouldBlock)
        let bytes = [UInt8](unsafeUninitializedCapacity: maximum) { buffer, initialized in
            outcome = Result { () throws(SystemCallError) in
                try syscall("read", nonBlocking: true) { Glibc.read(descriptor, buffer.baseAddress, buffer.count) }
            }
            if case .success(.processed(let count)) = outcome { initialized = count } else { initialized = 0 }
        }
        switch try outcome.get() {
        case .processed: return .processed(bytes)
        case .wouldBlock: return .wouldBlock
        }
    }

    /// Sends `pieces` in order with one `sendmsg` (at most ``maxPiecesPerSend`` of them) and without raising SIGPIPE
    /// on a closed peer; returns how many bytes went out.
    static func send(
        _ descriptor: Int32, _ pieces: ArraySlice<ArraySlice<UInt8>>
    ) throws(SystemCallError) -> IOResult<Int> {
        let count = min(pieces.count, maxPiecesPerSend)
        var vectors = [iovec](repeating: iovec(), count: count)
        // Each piece's storage is pinned only inside its `withUnsafeBytes`, so the calls nest, the send innermost.
        func gather(_ index: Int) -> Result<IOResult<Int>, SystemCallError> {
            guard index < count else {
                return vectors.withUnsafeMutableBufferPointer { vectors in
                    var message = msghdr()
                    message.msg_iov = vectors.baseAddress
                    message.msg_iovlen = vectors.count
                    return Result { () throws(SystemCallError) in
                        try syscall("sendmsg", nonBlocking: true) { sendmsg(descriptor, &message, Int32(MSG_NOSIGNAL)) }
                    }
                }
            }
            return pieces[pieces.startIndex + index].withUnsafeBytes { buffer in
                vectors[index] = iovec(
                    iov_base: buffer.baseAddress.map { UnsafeMutableRawPointer(mutating: $0) }, iov_len: buffer.count)
                return gather(index + 1)
            }
        }
        return try gather(0).get()
    }

    /// Pieces one `send` takes: a response is its head and a body of one piece, or of about ten (an account's); a
    /// pipelining client's few responses fit too.
    static let maxPiecesPerSend = 64

    /// A listening, non-blocking TCP socket bound to `host:port`, and the address actually bound.
    static func listen(
        host: String, port: Int, backlog: Int32
    ) throws -> (descriptor: Int32, port: Int, listener: HTTPListener) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let info = list else {
            throw HTTPServerError("resolve \(host):\(port): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }

        let descriptor: Int32
        do {
            descriptor = try syscall("socket") {
                socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            }
        } catch {
            throw HTTPServerError("socket \(host):\(port): \(error)")
        }
        do {
            var one: Int32 = 1
            try syscall("setsockopt(SO_REUSEADDR)") {
                setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            try syscall("bind") { bind(descriptor, info.pointee.ai_addr, info.pointee.ai_addrlen) }
            try syscall("listen") { Glibc.listen(descriptor, backlog) }
            try setNonBlocking(descriptor)
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            try withUnsafeMutablePointer(to: &address) { pointer throws(SystemCallError) in
                try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress throws(SystemCallError) in
                    _ = try syscall("getsockname") { getsockname(descriptor, socketAddress, &length) }
                }
            }
            let bound = describe(address)
            return (descriptor, bound.port, HTTPListener(address: text(bound), isLoopback: bound.isLoopback))
        } catch {
            closeDescriptor(descriptor)
            throw HTTPServerError("bind \(host):\(port): \(String(cString: strerror(error.errno)))")
        }
    }

    static func setNonBlocking(_ descriptor: Int32) throws(SystemCallError) {
        let flags = try syscall("fcntl(F_GETFL)") { fcntl(descriptor, F_GETFL) }
        try syscall("fcntl(F_SETFL)") { fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) }
    }

    /// Accepts one connection, non-blocking and close-on-exec, with its peer.
    static func accept(_ listener: Int32) throws(SystemCallError) -> IOResult<(descriptor: Int32, peer: HTTPPeer)> {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = try withUnsafeMutablePointer(to: &address) { pointer throws(SystemCallError) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress throws(SystemCallError) in
                try syscall("accept4", nonBlocking: true) {
                    accept4(listener, socketAddress, &length, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
                }
            }
        }
        switch result {
        case .wouldBlock: return .wouldBlock
        case .processed(let descriptor):
            // Responses go out in one write each; no Nagle delay between a response and the next.
            var one: Int32 = 1
            _ = setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let peer = describe(address)
            return .processed((descriptor, HTTPPeer(address: text(peer), isLoopback: peer.isLoopback)))
        }
    }

    private static func text(_ address: (host: String, port: Int, isLoopback: Bool)) -> String {
        address.host.contains(":") ? "[\(address.host)]:\(address.port)" : "\(address.host):\(address.port)"
    }

    private static func cText(_ text: [CChar]) -> String {
        String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func describe(_ storage: sockaddr_storage) -> (host: String, port: Int, isLoopback: Bool) {
        var storage = storage
        let family = Int32(storage.ss_family)
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        return withUnsafePointer(to: &storage) { pointer in
            switch family {
            case AF_INET:
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                    var raw = address.pointee.sin_addr
                    inet_ntop(AF_INET, &raw, &text, socklen_t(text.count))
                    let bytes = withUnsafeBytes(of: &raw) { Array($0) }
                    return (cText(text), Int(UInt16(bigEndian: address.pointee.sin_port)), HTTPPeer.isLoopback(bytes))
                }
            case AF_INET6:
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    var raw = address.pointee.sin6_addr
                    inet_ntop(AF_INET6, &raw, &text, socklen_t(text.count))
                    let bytes = withUnsafeBytes(of: &raw) { Array($0) }
                    return (cText(text), Int(UInt16(bigEndian: address.pointee.sin6_port)), HTTPPeer.isLoopback(bytes))
                }
            default:
                return ("unknown", 0, false)
            }
        }
    }
}

/// What an epoll set reported for one descriptor.
struct PollEvent {
    var descriptor: Int32
    var isReadable: Bool
    var isWritable: Bool
    /// Hang-up or error: the peer is gone or reset, and nothing more can be sent.
    var isFailed: Bool
}

/// An epoll set (level-triggered) and an eventfd through which other threads wake the thread that waits on it.
/// Owns both descriptors; only the waiting thread calls anything but `wake()`.
final class Poller: @unchecked Sendable {
    private let epoll: Int32
    private let wakeDescriptor: Int32
    private var ready = [epoll_event](repeating: epoll_event(), count: 64)

    init() throws(SystemCallError) {
        epoll = try syscall("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        do {
            wakeDescriptor = try syscall("eventfd") { eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC)) }
        } catch {
            closeDescriptor(epoll)
            throw error
        }
        do {
            try control(EPOLL_CTL_ADD, wakeDescriptor, readable: true, writable: false)
        } catch {
            closeDescriptor(wakeDescriptor)
            closeDescriptor(epoll)
            throw error
        }
    }

    deinit {
        closeDescriptor(wakeDescriptor)
        closeDescriptor(epoll)
    }

    func add(_ descriptor: Int32, readable: Bool, writable: Bool) throws(SystemCallError) {
        try control(EPOLL_CTL_ADD, descriptor, readable: readable, writable: writable)
    }

    func modify(_ descriptor: Int32, readable: Bool, writable: Bool) throws(SystemCallError) {
        try control(EPOLL_CTL_MOD, descriptor, readable: readable, writable: writable)
    }

    /// Before closing the descriptor, so that a number the kernel reuses never inherits its registration.
    func remove(_ descriptor: Int32) {
        var unused = epoll_event()
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, descriptor, &unused)
    }

    private func control(_ operation: Int32, _ descriptor: Int32, readable: Bool, writable: Bool) throws(SystemCallError) {
        var event = epoll_event()
        event.events = (readable ? EPOLLIN.rawValue : 0) | (writable ? EPOLLOUT.rawValue : 0)
        event.data.fd = descriptor
        try syscall("epoll_ctl") { epoll_ctl(epoll, operation, descriptor, &event) }
    }

    /// Waits up to `milliseconds` (-1: no limit) and reports each ready descriptor; wake-ups are consumed here.
    func wait(milliseconds: Int32, _ body: (PollEvent) -> Void) {
        let count = ready.withUnsafeMutableBufferPointer { buffer in
            epoll_wait(epoll, buffer.baseAddress, Int32(buffer.count), milliseconds)
        }
        guard count > 0 else { return }  // timeout or EINTR: the caller's loop comes straight back
        for index in 0..<Int(count) {
            let event = ready[index]
            let descriptor = event.data.fd
            if descriptor == wakeDescriptor {
                var counter: UInt64 = 0
                _ = read(wakeDescriptor, &counter, MemoryLayout<UInt64>.size)
                continue
            }
            let flags = event.events
            body(
                PollEvent(
                    descriptor: descriptor,
                    isReadable: flags & EPOLLIN.rawValue != 0,
                    isWritable: flags & EPOLLOUT.rawValue != 0,
                    isFailed: flags & (EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0))
        }
    }

    /// Any thread: makes a current or the next `wait` return.
    func wake() {
        var one: UInt64 = 1
        _ = write(wakeDescriptor, &one, MemoryLayout<UInt64>.size)
    }
}

/// Runs `body` on a new detached thread (an event loop lives for the server's lifetime; Dispatch's pool threads are
/// not meant to block in `epoll_wait` forever).
package func startThread(_ body: @escaping @Sendable () -> Void) throws(SystemCallError) {
    final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
    let box = Unmanaged.passRetained(Body(body)).toOpaque()
    var thread = pthread_t()
    let status = pthread_create(&thread, nil, { argument in
        guard let argument else { return nil }
        Unmanaged<Body>.fromOpaque(argument).takeRetainedValue().run()
        return nil
    }, box)
    guard status == 0 else {
        Unmanaged<Body>.fromOpaque(box).release()
        throw SystemCallError(call: "pthread_create", errno: status)
    }
    pthread_detach(thread)
}
