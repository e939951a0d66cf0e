"""What a process of attnmt stands on: files written whole or not at all (`safe_write`), a folder held
by one process at a time (`lock`), the `torchrun` world it runs in (`distributed`), its threads (`threads`),
memory given back while it trains (`memory`), and how the processes attnmt owns end (`process`)."""
