"""Randomization methods, pure and local: PRAM operators, estimators and privacy measures,
the perturbation mechanisms and the learners on randomized data. No channel, no grpc."""
