"""The benches, one module per ``hearth bench`` subcommand (``commands.BENCHES`` names them): each declares
its parameters and runs its measurement and its floor. They are independent of one another but for the
runs five reuse (archive: batch_replay and rebuild; learn: batch_replay; gateway and mixed: roundtrip;
memory: actor): a contract names those imports and refuses any other between benches."""
