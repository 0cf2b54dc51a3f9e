internal import COpenSSL

/// A failure inside OpenSSL, with the text of its error queue.
package struct OpenSSLError: Error, CustomStringConvertible {
    package var description: String

    /// Drains the calling thread's error queue so the next call starts clean.
    package init(_ operation: String) {
        var reasons: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        description = reasons.isEmpty ? operation : "\(operation): \(reasons.joined(separator: "; "))"
    }
}

