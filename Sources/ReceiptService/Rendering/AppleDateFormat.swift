public import ReceiptEngine
#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif

/// The three renderings Apple's verifyReceipt gives each date: `2024-05-01 12:00:00 Etc/GMT`, milliseconds as a
/// string, and Cupertino wall time `2024-05-01 05:00:00 America/Los_Angeles`.
///
/// Pacific time is computed from the US daylight-saving rules rather than the host's zoneinfo, so answers do not depend
/// on what a container image ships: since 2007 (Energy Policy Act of 2005) daylight time runs from the second Sunday of
/// March, 02:00 PST, to the first Sunday of November, 02:00 PDT; from 1987 to 2006 from the first Sunday of April to
/// the last Sunday of October. Earlier instants use the 1987 rules; no App Store receipt predates 2008.
public enum AppleDateFormat {
    public static func gmt(_ date: ReceiptDate) -> String {
        wallClock(date.millisecondsSince1970) + " Etc/GMT"
    }

    public static func milliseconds(_ date: ReceiptDate) -> String {
        String(date.millisecondsSince1970)
    }

    public static func pacific(_ date: ReceiptDate) -> String {
        let offsetHours: Int64 = isPacificDaylightTime(date) ? -7 : -8
        return wallClock(date.millisecondsSince1970 + offsetHours * 3_600_000) + " America/Los_Angeles"
    }

    /// Whether US Pacific daylight time is in force at that instant.
    static func isPacificDaylightTime(_ date: ReceiptDate) -> Bool {
        guard let year = Int(date.rfc3339.prefix(4)) else { return false }
        let start: Int64
        let end: Int64
        if year >= 2007 {
            start = sunday(onOrAfter: firstOf(3, year)) + 7 * 86_400
            end = sunday(onOrAfter: firstOf(11, year))
        } else {
            start = sunday(onOrAfter: firstOf(4, year))
            end = sunday(onOrAfter: firstOf(11, year)) - 7 * 86_400
        }
        // 02:00 PST is 10:00 UTC; 02:00 PDT is 09:00 UTC.
        let seconds = date.secondsSince1970
        return seconds >= start + 10 * 3600 && seconds < end + 9 * 3600
    }

    /// `YYYY-MM-DD HH:MM:SS` of a UTC instant; the engine's RFC 3339 text with Apple's separators.
    private static func wallClock(_ milliseconds: Int64) -> String {
        let text = ReceiptDate(millisecondsSince1970: milliseconds).rfc3339
        return String(text.dropLast()).replacing("T", with: " ")
    }

    /// Seconds since 1970 of midnight UTC on the first of a month.
    private static func firstOf(_ month: Int, _ year: Int) -> Int64 {
        let text = "\(year)-\(month < 10 ? "0" : "")\(month)-01T00:00:00Z"
        return ReceiptDate(rfc3339: text)?.secondsSince1970 ?? 0
    }

    /// Midnight of the first Sunday on or after a midnight; 1970-01-01 was a Thursday.
    private static func sunday(onOrAfter midnight: Int64) -> Int64 {
        let days = midnight / 86_400 - (midnight % 86_400 < 0 ? 1 : 0)
        let weekday = ((days % 7) + 7 + 4) % 7
        return midnight + ((7 - weekday) % 7) * 86_400
    }
}
