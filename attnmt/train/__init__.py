"""Training: the Trainer loop (`trainer`), its loss (`loss`, `cross_entropy`, guided alignment in
`guidance`), optimizer and schedules (`optim`, `schedulers`), gradient accumulation over the `torchrun`
world (`accumulate`), what a run records and shows (`events`, `progress`), and continuing a run
(`resume`, `finetune`)."""
