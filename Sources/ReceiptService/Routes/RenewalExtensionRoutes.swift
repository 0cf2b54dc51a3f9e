import HTTP1Server

extension ReceiptRoutes {
    /// `POST /v1/subscriptions/{original_transaction_id}/extend`.
    func extendRenewal(_ request: HTTPRequest, originalTransactionID: String, apple: AppleAdmission) -> HTTPResponse {
        problem(RequestProblem(status: .notImplemented, code: .notImplemented, message: "not implemented yet"))
    }
}
