// Stand-in until `SupportPage.html` lands from the support-page branch; the integrator replaces the body with
// `SupportPage.html` and deletes this file's placeholder text.
func supportPageHTML() -> String {
    """
    <!DOCTYPE html>
    <html lang="en"><head><meta charset="utf-8"><title>receiptd</title></head>
    <body><h1>receiptd</h1>
    <form method="post" action="/v1/validate" enctype="multipart/form-data">
    <p><label>Receipt file <input type="file" name="receipt" required></label></p>
    <p><label>Device ID (optional) <input type="text" name="device_id"></label></p>
    <p><button type="submit">Check receipt</button></p>
    </form></body></html>

    """
}
