import Foundation
import ReceiptForge

/// `count` distinct notification bodies as Apple posts them (`{"signedPayload": …}`: an envelope with a nested
/// transaction and renewal info, three ES256 signatures), about `originals` original transactions, signed by
/// `authority`.
func forgedNotificationBodies(count: Int, originals: Int = 200, authority: JWSTestAuthority) -> [[UInt8]] {
    let signed = Date().addingTimeInterval(-60)
    return (0..<count).map { index in
        var transaction = TransactionBlueprint(bundleID: "com.example.bench", signedDate: signed)
        transaction.transactionID = String(3_000_000 + index)
        transaction.originalTransactionID = String(2_000_000 + index % originals)
        var renewal = RenewalInfoBlueprint(signedDate: signed)
        renewal.originalTransactionID = transaction.originalTransactionID
        var notification = NotificationBlueprint(type: "DID_RENEW", bundleID: "com.example.bench", signedDate: signed)
        notification.signedTransactionInfo = try! authority.sign(transaction.payload)
        notification.signedRenewalInfo = try! authority.sign(renewal.payload)
        return Array("{\"signedPayload\": \"\(try! authority.sign(notification.payload))\"}".utf8)
    }
}

/// Writes `count` distinct forged notifications to `directory`/notifications/ (one body per file) and their test
/// root to `directory`/jws-root.pem, for `Benchmarks/scripts/ingest.sh` to post to a running server.
func writeIngestNotifications(count: Int, to directory: String) {
    guard !directory.isEmpty else {
        FileHandle.standardError.write(Data("forge-notifications needs --out DIR\n".utf8))
        exit(2)
    }
    do {
        let authority = try JWSTestAuthority.generate()
        try authority.write(toDirectory: directory)
        let folder = directory + "/notifications"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for (index, body) in forgedNotificationBodies(count: count, authority: authority).enumerated() {
            try Data(body).write(to: URL(fileURLWithPath: folder + String(format: "/%06d.json", index)))
        }
        print("wrote \(count) notifications to \(folder) and their root to \(directory)/jws-root.pem")
    } catch {
        FileHandle.standardError.write(Data("forge-notifications: \(error)\n".utf8))
        exit(1)
    }
}
