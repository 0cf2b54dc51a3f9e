import Ledger
import Testing

@testable import receiptd

/// `receiptd store` prints libpq's messages, which may echo parts of a malformed connection string: the password in
/// it must never reach the terminal or a log collector.
struct StoreCommandTests {
    @Test(arguments: [
        ("host=db user=app password=s3cr3t-pw dbname=ledger", "password authentication failed: s3cr3t-pw"),
        ("host=db password='s3cr3t-pw' dbname=ledger", "near 's3cr3t-pw'"),
        ("postgresql://app:s3cr3t-pw@db.internal/ledger", "invalid URI: app:s3cr3t-pw@db.internal"),
        ("postgresql://app@db.internal/ledger?sslmode=require&password=s3cr3t-pw", "unknown option password=s3cr3t-pw"),
    ])
    func passwordInAMessage_isMasked(connectionString: String, message: String) {
        let redacted = redactingSecrets(of: connectionString, in: message)
        #expect(!redacted.contains("s3cr3t-pw"))
        #expect(redacted.contains("***"))
    }

    @Test func wholeConnectionStringInAMessage_isReplaced() {
        let connectionString = "host=db user=app dbname=ledger"
        #expect(
            redactingSecrets(of: connectionString, in: "bad: \"\(connectionString)\"") == "bad: \"(connection string)\""
        )
    }

    @Test func messageWithoutSecrets_isUnchanged() {
        let message = "connection to server on socket \"/tmp/x/.s.PGSQL.5432\" failed: No such file or directory"
        #expect(redactingSecrets(of: "host=/tmp/x user=postgres", in: message) == message)
    }

    @Test(arguments: [
        ([String](), ExitStatus.usage), (["frobnicate"], ExitStatus.usage), (["--help"], ExitStatus.success),
        (["status", "--help"], ExitStatus.success), (["backup", "--help"], ExitStatus.success),
        (["migrate", "--help"], ExitStatus.success), (["status", "--bogus"], ExitStatus.usage),
        (["backup"], ExitStatus.usage), (["status", "extra"], ExitStatus.usage),
    ])
    func usageMistakes_exitTwo_andHelp_exitsZero(arguments: [String], status: Int32) {
        #expect(runReceiptd(["store"] + arguments) == status)
    }
}
