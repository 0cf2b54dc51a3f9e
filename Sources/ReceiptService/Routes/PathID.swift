/// The ids in the ledger's paths: 1 to 64 characters of `[0-9A-Za-z._-]`, which every Apple id and any sane
/// account-side id fits, and nothing that could bloat a cache or a log.
enum PathID {
    static let maximumLength = 64

    static func isValid(_ id: Substring) -> Bool {
        (1...maximumLength).contains(id.utf8.count) && id.utf8.allSatisfy(isAllowed)
    }

    static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            true
        default: false
        }
    }
}
