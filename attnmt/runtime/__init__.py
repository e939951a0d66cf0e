"""What a process of attnmt stands on: files written whole or not at all (`safe_write`), a folder held
by one process at a time (`lock`), and the `torchrun` world it runs in (`distributed`)."""
