-- POST every file in $RECEIPT_DIR in turn as raw DER to /v1/validate: distinct forgeries, so no answer can be reused.
local directory = assert(os.getenv("RECEIPT_DIR"), "set RECEIPT_DIR")
local bodies = {}
local listing = io.popen('ls "' .. directory .. '"')
for name in listing:lines() do
    local file = assert(io.open(directory .. "/" .. name, "rb"))
    bodies[#bodies + 1] = file:read("*a")
    file:close()
end
listing:close()
assert(#bodies > 0, "no files in " .. directory)
local headers = { ["Content-Type"] = "application/octet-stream" }
local index = 0
request = function()
    index = index % #bodies + 1
    return wrk.format("POST", nil, headers, bodies[index])
end
