#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// An instant from a receipt, kept to the millisecond as Apple's `_ms` fields need.
public struct ReceiptDate: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let millisecondsSince1970: Int64

    public init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    public init(_ date: Date) {
        self.millisecondsSince1970 = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    }

    public var date: Date { Date(timeIntervalSince1970: Double(millisecondsSince1970) / 1000) }

    public static func < (lhs: ReceiptDate, rhs: ReceiptDate) -> Bool {
        lhs.millisecondsSince1970 < rhs.millisecondsSince1970
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` in UTC, the one form receiptd prints.
    public var rfc3339: String {
        var text: [UInt8] = []
        text.reserveCapacity(20)
        appendRFC3339(to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// Appends `rfc3339`'s UTF-8 to `output` without making a string: JSON answers print many dates, so the digits
    /// are written with constant divisors (multiplications) rather than a general number formatter, inlined byte
    /// appends with no call between them.
    public func appendRFC3339(to output: inout [UInt8]) {
        let c = CivilTime(secondsSince1970: secondsSince1970)
        let zero = UInt8(ascii: "0")
        @inline(__always) func append(_ separator: UInt8, _ twoDigits: Int) {
            output.append(separator)
            output.append(zero + UInt8(twoDigits / 10))
            output.append(zero + UInt8(twoDigits % 10))
        }
        if (0...9999).contains(c.year) {
            output.append(zero + UInt8(c.year / 1000))
            output.append(zero + UInt8(c.year / 100 % 10))
            output.append(zero + UInt8(c.year / 10 % 10))
            output.append(zero + UInt8(c.year % 10))
        } else {
            // Years outside 0...9999 never occur in receipts; they print as the number they are.
            let year = String(c.year).utf8
            output.append(contentsOf: repeatElement(zero, count: max(0, 4 - year.count)))
            output.append(contentsOf: year)
        }
        append(UInt8(ascii: "-"), c.month)
        append(UInt8(ascii: "-"), c.day)
        append(UInt8(ascii: "T"), c.hour)
        append(UInt8(ascii: ":"), c.minute)
        append(UInt8(ascii: ":"), c.second)
        output.append(UInt8(ascii: "Z"))
    }

    /// Whole seconds, rounded toward the past so that negative instants print the second they fall in.
    public var secondsSince1970: Int64 {
        let (quotient, remainder) = millisecondsSince1970.quotientAndRemainder(dividingBy: 1000)
        return remainder < 0 ? quotient - 1 : quotient
    }

    public var description: String { rfc3339 }

    /// Parses the RFC 3339 forms seen in receipts: `Z`, `±hh:mm` or `±hhmm` offsets (Xcode writes the last),
    /// optional fractional seconds. A leap second (`:60`) counts as the first second of the next minute, as POSIX
    /// time does. Returns nil for anything else.
    public init?(rfc3339 text: String) {
        self.init(rfc3339UTF8: Array(text.utf8)[...])
    }

    /// `init?(rfc3339:)` on the text's UTF-8, read where it lies (a receipt's attribute bytes).
    init?(rfc3339UTF8 text: ArraySlice<UInt8>) {
        var scanner = DateScanner(text)
        guard let year = scanner.digits(4), scanner.take(UInt8(ascii: "-")),
            let month = scanner.digits(2), scanner.take(UInt8(ascii: "-")),
            let day = scanner.digits(2), scanner.take(UInt8(ascii: "T")) || scanner.take(UInt8(ascii: "t")),
            let hour = scanner.digits(2), scanner.take(UInt8(ascii: ":")),
            let minute = scanner.digits(2), scanner.take(UInt8(ascii: ":")),
            let second = scanner.digits(2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= CivilTime.daysIn(month: month, year: year),
            hour <= 23, minute <= 59, second <= 60
        else { return nil }
        var milliseconds: Int64 = 0
        if scanner.take(UInt8(ascii: ".")) {
            var scale: Int64 = 100
            var count = 0
            while let digit = scanner.digit() {
                milliseconds += Int64(digit) * scale
                scale /= 10
                count += 1
            }
            guard count > 0 else { return nil }
        }
        var offsetSeconds = 0
        if scanner.take(UInt8(ascii: "Z")) || scanner.take(UInt8(ascii: "z")) {
            offsetSeconds = 0
        } else if let sign = scanner.sign() {
            guard let offsetHours = scanner.digits(2) else { return nil }
            _ = scanner.take(UInt8(ascii: ":"))
            guard let offsetMinutes = scanner.digits(2), offsetHours <= 23, offsetMinutes <= 59 else { return nil }
            offsetSeconds = sign * (offsetHours * 3600 + offsetMinutes * 60)
        } else {
            return nil
        }
        guard scanner.atEnd else { return nil }
        let days = CivilTime.daysSince1970(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetSeconds)
        self.millisecondsSince1970 = seconds * 1000 + milliseconds
    }
}

private struct DateScanner {
    private let bytes: ArraySlice<UInt8>
    private var index: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        index = bytes.startIndex
    }

    var atEnd: Bool { index == bytes.endIndex }

    mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.endIndex, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    mutating func digit() -> Int? {
        guard index < bytes.endIndex, (48...57).contains(bytes[index]) else { return nil }
        defer { index += 1 }
        return Int(bytes[index] - 48)
    }

    mutating func digits(_ count: Int) -> Int? {
        var value = 0
        for _ in 0..<count {
            guard let d = digit() else { return nil }
            value = value * 10 + d
        }
        return value
    }

    mutating func sign() -> Int? {
        if take(UInt8(ascii: "+")) { return 1 }
        if take(UInt8(ascii: "-")) { return -1 }
        return nil
    }
}

/// Proleptic Gregorian calendar arithmetic (Howard Hinnant's days-from-civil), so that dates never go through
/// Foundation's calendars, which are slow and locale-sensitive.
package struct CivilTime {
    package let year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int

    package init(secondsSince1970: Int64) {
        var days = secondsSince1970 / 86_400
        var rest = secondsSince1970 % 86_400
        if rest < 0 {
            rest += 86_400
            days -= 1
        }
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        year = Int(yoe + era * 400 + (m <= 2 ? 1 : 0))
        month = Int(m)
        day = Int(d)
        hour = Int(rest / 3600)
        minute = Int(rest % 3600 / 60)
        second = Int(rest % 60)
    }

    package static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}
