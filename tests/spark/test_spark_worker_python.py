"""register() makes Spark's Python workers run the driver's interpreter when the user chose none.

The driver runs as ``.venv/bin/python script.py`` with the virtualenv not activated: the
``python3`` first on PATH is the system's, which cannot import kafkacore. Without a chosen
worker Python, PySpark would start that one for its workers. The script runs in a fresh process
with PYSPARK_PYTHON unset (conftest.py sets it for this process, so the test cannot run here)."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from _records import produce

SCRIPT = textwrap.dedent('''
    import json, os, sys
    from pyspark.sql import SparkSession
    import kafkacore_spark as ks

    data_dir, bootstrap, topic, other_python = sys.argv[1:5]
    assert "PYSPARK_PYTHON" not in os.environ

    def session(**conf):
        b = (SparkSession.builder.master("local[2]").appName("worker-python")
             .config("spark.ui.enabled", "false").config("spark.driver.bindAddress", "127.0.0.1"))
        for k, v in conf.items():
            b = b.config(k, v)
        s = b.getOrCreate()
        s.sparkContext.setLogLevel("ERROR")
        return s

    out = {}
    spark = session()
    out["default_exec"] = spark.sparkContext.pythonExec
    ks.register(spark)
    out["exec"] = spark.sparkContext.pythonExec
    out["path_rows"] = spark.read.format("kafkacore").option("path", data_dir).option("subscribe", topic).load().count()
    out["broker_rows"] = (spark.read.format("kafkacore").option("kafka.bootstrap.servers", bootstrap)
                          .option("subscribe", topic).load().count())
    files = spark.read.format("binaryFile").load(os.path.join(data_dir, topic + "-*", "*.log"))
    out["udf_rows"] = ks.decode_batches(files, "content", path_column="path").count()

    def worker_python(batches):
        import pyarrow as pa
        for _ in batches:
            yield pa.record_batch([[sys.executable]], names=["p"])

    out["worker"] = spark.range(1).mapInArrow(worker_python, "p string").first()["p"]
    spark.stop()

    # a worker Python the user chose is left alone: the conf ...
    spark = session(**{"spark.pyspark.python": other_python})
    ks.register(spark)
    out["exec_with_conf"] = spark.sparkContext.pythonExec
    spark.stop()
    # ... or the environment variable
    os.environ["PYSPARK_PYTHON"] = other_python
    spark = session()
    ks.register(spark)
    out["exec_with_env"] = spark.sparkContext.pythonExec
    spark.stop()
    print("RESULT " + json.dumps(out))
''')


def _bare_python3():
    """A python3 that cannot import kafkacore_spark (the system's), or None."""
    for d in ("/usr/bin", "/bin", "/usr/local/bin"):
        exe = os.path.join(d, "python3")
        if os.path.exists(exe) and subprocess.run([exe, "-c", "import kafkacore_spark"], env={"PATH": d},
                                                  capture_output=True).returncode != 0:
            return exe
    return None


def test_register_makes_workers_use_the_running_python(broker, tmp_path):
    bare = _bare_python3()
    if bare is None:
        pytest.skip("no python3 on this machine that lacks kafkacore_spark: the test needs one to stand in "
                    "for the system Python first on PATH")
    topic = "worker-python"
    expected = produce(broker.bootstrap, topic, 120, "none")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(bare, bin_dir / "python3")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    if shutil.which("java", path=env["PATH"]) is None and not env.get("JAVA_HOME"):
        java = shutil.which("java")
        assert java, "the Spark tests need java"
        env["JAVA_HOME"] = os.path.dirname(os.path.dirname(os.path.realpath(java)))
    # the python3 a worker would start from this PATH cannot import kafkacore_spark
    probe = subprocess.run(["python3", "-c", "import kafkacore_spark"], env=env, capture_output=True, text=True)
    assert probe.returncode != 0 and "kafkacore_spark" in probe.stderr

    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), broker.data_dir, broker.bootstrap, topic, bare],
                          env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"the script failed ({proc.returncode}):\n{proc.stderr[-6000:]}"
    out = json.loads(lines[-1][len("RESULT "):])
    assert out["default_exec"] == "python3"  # what PySpark would start without register()
    assert out["exec"] == sys.executable
    assert out["path_rows"] == out["broker_rows"] == out["udf_rows"] == len(expected) == 120
    assert out["worker"] == sys.executable  # a UDF made after register() runs there too
    assert out["exec_with_conf"] == "python3"
    assert out["exec_with_env"] == bare
