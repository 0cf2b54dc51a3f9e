internal import CEpoll
internal import Glibc

/// Bytes from the kernel's CSPRNG (`getrandom`), fetched in batches: one system call serves hundreds of request
/// ids, so an unpredictable id costs about what a counter did.
final class RandomBytes: Sendable {
    static let shared = RandomBytes()

    private static let batchBytes = 4096
    private let pool = LockedState(Pool())

    private struct Pool {
        var bytes: [UInt8] = []
        var offset = 0
    }

    func nextUInt64() -> UInt64 {
        pool.withLock { pool in
            if pool.offset + 8 > pool.bytes.count {
                pool.bytes = Self.fill(count: Self.batchBytes)
                pool.offset = 0
            }
            var value: UInt64 = 0
            for index in pool.offset..<pool.offset + 8 { value = value << 8 | UInt64(pool.bytes[index]) }
            pool.offset += 8
            return value
        }
    }

    /// Blocks only before the kernel's pool is first initialised at boot; never returns predictable bytes.
    static func fill(count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            do {
                filled += try bytes.withUnsafeMutableBytes { buffer in
                    try syscall("getrandom") { getrandom(buffer.baseAddress! + filled, count - filled, 0) }
                }
            } catch {
                preconditionFailure("getrandom failed: \(error)")
            }
        }
        return bytes
    }
}
