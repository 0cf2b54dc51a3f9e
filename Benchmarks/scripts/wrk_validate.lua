-- POST the receipt named by $RECEIPT_FILE as raw DER to /v1/validate (adapted from ../shared/tools/wrk_post.lua).
local file = assert(io.open(os.getenv("RECEIPT_FILE"), "rb"))
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "application/octet-stream"
