"""The operator commands of ``kafkacore`` (``kafkacore NOUN VERB ...``).

One module per noun; each has ``register(subparsers, common)``, which adds its parser with
``set_defaults(run=...)``; ``run(args)`` returns the exit code (common.EXIT_*). They talk to the
cluster through kafkacore's own client (client/admin.py, the Producer and Consumer) and the
Kafka protocol only, so they work against any Kafka-compatible cluster; ``log dump`` reads
files. Modules import their heavy parts inside ``run`` so that ``kafkacore --help`` stays quick.
The ``cluster`` noun is cli.py's (``cluster up``); cluster_info.py adds its ``describe`` verb
(``register_verbs``). common.py has the grammar helpers (add_noun, add_verb), output.py the
printing, progress.py the progress bar.
"""

# the nouns, in the order ``kafkacore --help`` lists them; each names kafkacore.tools.<module>
# (``console`` follows them: its command is kafkacore/console/command.py's)
NOUNS = ("topics", "groups", "configs", "records", "produce", "consume", "partitions", "leaders", "acls", "users",
         "quotas", "perf", "log_dump", "completion")
