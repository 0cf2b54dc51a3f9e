import HTTP1Server

extension ReceiptRoutes {
    /// `PUT /v1/transactions/{transaction_id}/consumption`: the backend's answer to Apple's refund question.
    func putConsumption(_ request: HTTPRequest, transactionID: String) -> HTTPResponse {
        problem(RequestProblem(status: .notImplemented, code: .notImplemented, message: "not implemented yet"))
    }
}
