#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif
package import HTTP1Server

/// The process's standard input, output or error, read and written with `read(2)` and `write(2)`: `FileHandle` is
/// Foundation's, and receiptd links FoundationEssentials, the part of Foundation without ICU.
package struct StandardStream: Sendable {
    package let descriptor: Int32

    package static let input = StandardStream(descriptor: 0)
    package static let output = StandardStream(descriptor: 1)
    package static let error = StandardStream(descriptor: 2)

    /// Writes every byte, in one `write(2)` unless the kernel takes fewer. A failure (a closed pipe) drops the rest:
    /// this is where failures would be reported, so there is nowhere left to say it.
    package func write(_ bytes: some Collection<UInt8>) {
        let all = Array(bytes)
        all.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let remaining = buffer.count - offset
                guard let written = try? HTTP1Server.syscall("write", { systemWrite(descriptor, buffer.baseAddress! + offset, remaining) })
                else { return }
                offset += written
            }
        }
    }

    /// Writes the text's UTF-8.
    package func write(_ text: String) {
        write(text.utf8)
    }

    /// Every byte up to the end of the stream.
    package func readToEnd() throws(StandardStreamError) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = try chunk.withUnsafeMutableBytes { buffer in
                Result { () throws(SystemCallError) in
                    try HTTP1Server.syscall("read") { systemRead(descriptor, buffer.baseAddress!, buffer.count) }
                }
            }.get()
            if count == 0 { return bytes }
            bytes += chunk[..<count]
        }
    }
}

/// A failed `read(2)` or `write(2)` on a standard stream, with its `errno`.
package typealias StandardStreamError = SystemCallError

// The C functions under other names: inside `StandardStream`, `write` and `read` name its own methods.
private func systemWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, bytes, count)
}

private func systemRead(_ descriptor: Int32, _ bytes: UnsafeMutableRawPointer, _ count: Int) -> Int {
    read(descriptor, bytes, count)
}
