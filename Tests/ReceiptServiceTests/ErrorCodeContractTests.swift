import Foundation
import ReceiptEngine
import Testing

@testable import ReceiptService

/// Every machine code and detail the service can answer is in docs/openapi.yaml's error schema, so a client written
/// against the document can match each one.
struct ErrorCodeContractTests {
    static let openAPI: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("docs/openapi.yaml"), encoding: .utf8)) ?? ""
    }()

    /// The values of the `enum:` list that follows `schema:` in the components.
    static func documented(_ schema: String) -> Set<String> {
        guard let start = openAPI.range(of: "\n    \(schema):\n") else { return [] }
        let rest = openAPI[start.upperBound...]
        guard let open = rest.range(of: "enum: ["), let close = rest[open.upperBound...].firstIndex(of: "]") else {
            return []
        }
        let values = rest[open.upperBound..<close].split(separator: ",")
        return Set(values.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) })
    }

    @Test func everyServiceCode_isDocumented() {
        let documented = Self.documented("HTTPErrorCode")
        // `malformed_jws` is a verdict's code, documented with the others in ValidationErrorCode.
        let codes = RequestProblem.Code.allCases.map(\.rawValue).filter { $0 != "malformed_jws" }
        let missing = codes.filter { !documented.contains($0) }
        #expect(!documented.isEmpty)
        #expect(missing.isEmpty, "\(missing)")
    }

    @Test func everyDetail_isDocumented() {
        let documented = Self.documented("ErrorDetail")
        let details = RequestProblem.Detail.allCases.map(\.rawValue) + ValidationError.Detail.all.map(\.rawValue)
        let missing = details.filter { !documented.contains($0) }
        #expect(!documented.isEmpty)
        #expect(missing.isEmpty, "\(missing)")
    }
}
