/// The ids that reach the ledger or Apple (path ids, `/lookup?id=`, notification uuids): 1 to 64 characters of
/// `[0-9A-Za-z._-]`, which every Apple id and any sane account-side id fits, and nothing that could bloat a cache or a
/// log. `.` and `..` are refused: libcurl removes such dot-segments, so Apple would be asked for another path.
enum PathID {
    static let maximumLength = 64

    /// The rule, for messages.
    static let rule = "1 to \(maximumLength) characters of 0-9 A-Z a-z . _ -, and not . or .."

    static func isValid(_ id: Substring) -> Bool {
        (1...maximumLength).contains(id.utf8.count) && id.utf8.allSatisfy(isAllowed) && !isDotSegment(id)
    }

    static func isValid(_ id: String) -> Bool { isValid(Substring(id)) }

    /// RFC 3986 §5.2.4's dot-segments.
    private static func isDotSegment(_ id: Substring) -> Bool { id == "." || id == ".." }

    static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            true
        default: false
        }
    }
}
