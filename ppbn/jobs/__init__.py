"""What a daemon can run with its peers, without grpc: the job framework, the local policy,
the job kinds (learn, tables, PRAM, perturbation), checkpoints and record alignment."""
