-- Appended to wrk.lua for Portkey: its routing headers; WRK_HOST is the upstream base with /v1.
wrk.headers["x-portkey-provider"] = "openai"
wrk.headers["x-portkey-custom-host"] = os.getenv("WRK_HOST")
