#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

extension ArraySlice where Element == UInt8 {
    /// Whether both hold the same bytes, compared with `memcmp`: `==` on slices compares element by element,
    /// several instructions a byte, and the chain cache compares kilobytes of certificates on every hit.
    package func hasSameBytes(as other: ArraySlice<UInt8>) -> Bool {
        guard count == other.count else { return false }
        guard !isEmpty else { return true }
        return withUnsafeBufferPointer { mine in
            other.withUnsafeBufferPointer { theirs in memcmp(mine.baseAddress!, theirs.baseAddress!, mine.count) == 0 }
        }
    }
}
