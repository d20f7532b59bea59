"""Generated log-parsing datasets in Loghub's layout (no downloads).

Loghub (Zhu et al. 2019, "Tools and Benchmarks for Automated Log Parsing",
ICSE-SEIP; He et al. 2020, "Loghub") ships, per system, 2,000 raw lines
(``X_2k.log``) and their ground truth (``X_2k.log_structured.csv``: LineId, the
header fields, Content, EventId, EventTemplate with ``<*>`` for parameters).
This module writes files of the same shape from templates modeled on the
events of five source styles -- HDFS, BGL (Blue Gene/L), OpenSSH, Spark, and
PyTorch training logs -- with parameters drawn at random, so the template miner
can be scored without shipping or downloading anyone's logs.

What makes them hard on purpose (as real logs are): parameters that are words
(user names, states, metric names), variable-length parameters (lists of
datanodes, paths with spaces removed), events that differ in a single constant
word ("Connection closed by" vs "reset by"), key: value dumps whose keys are the
event, skewed frequencies (a few events make most lines, many occur once or twice).

    python benchmarks/data/loghub_like.py OUT_DIR [--seed 0]
"""

from __future__ import annotations

import argparse
import csv
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LINES = 2000
Param = Callable[[random.Random], str]


# --- parameter generators ------------------------------------------------------------------

def _ip(r: random.Random) -> str:
    return f"10.{r.randint(250, 251)}.{r.randint(0, 255)}.{r.randint(1, 254)}"


def _public_ip(r: random.Random) -> str:
    return f"{r.randint(1, 223)}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"


def _blk(r: random.Random) -> str:
    return f"blk_{r.choice(['', '-'])}{r.randint(10**17, 10**19 - 1)}"


def _int(lo: int, hi: int) -> Param:
    return lambda r: str(r.randint(lo, hi))


def _float(lo: float, hi: float, digits: int = 1) -> Param:
    return lambda r: f"{r.uniform(lo, hi):.{digits}f}"


def _choice(*options: str) -> Param:
    return lambda r: r.choice(options)


def _hex(n: int) -> Param:
    return lambda r: "0x" + "".join(r.choice("0123456789abcdef") for _ in range(n))


USERS = ("root", "admin", "test", "guest", "oracle", "user", "ftpuser", "pi", "ubnt", "support",
         "git", "nagios", "postgres", "ubuntu", "mysql", "www", "tomcat", "hadoop", "deploy",
         "jenkins", "backup", "alex", "maria", "webmaster", "operator")
HOSTS = ("LabSZ", "ns1.example.org", "mail.corp.example.com", "static.vnpt.vn",
         "host-112.ext.example.net", "customer.isp.example", "unknown")


def _user(r: random.Random) -> str:
    return r.choice(USERS)


def _hostname(r: random.Random) -> str:
    return r.choice(HOSTS) if r.random() < 0.5 else f"{r.choice(['srv', 'cl', 'dyn'])}-" \
        f"{r.randint(1, 254)}-{r.randint(1, 254)}.{r.choice(['example.com', 'isp.net'])}"


def _hdfs_path(r: random.Random) -> str:
    return (f"/user/root/{r.choice(['rand', 'randtxt', 'sortrand'])}{r.randint(1, 9)}/"
            f"_temporary/_task_200811{r.randint(100000, 999999)}_{r.randint(1, 99):04d}_"
            f"{r.choice('mr')}_{r.randint(0, 999):06d}_0/part-{r.randint(0, 99):05d}")


def _datanodes(r: random.Random) -> str:  # variable length: 1-3 tokens
    return " ".join(f"{_ip(r)}:50010" for _ in range(r.randint(1, 3)))


def _bgl_node(r: random.Random) -> str:
    board = r.choice("0123456789ABCDEF")
    return (f"R{r.randint(0, 7)}{r.randint(0, 7)}-M{r.randint(0, 1)}-N{board}"
            f"-C:J{r.randint(2, 17):02d}-U{r.randint(0, 1)}1")


def _cio(r: random.Random) -> str:
    return f"172.16.{r.randint(96, 127)}.{r.randint(1, 254)}:{r.randint(30000, 60000)}"


def _spark_host(r: random.Random) -> str:
    return f"mesos-slave-{r.randint(1, 30):02d}"


def _size_kb(r: random.Random) -> str:
    return f"{r.uniform(0.1, 40):.1f}"


def _dir(r: random.Random) -> str:
    return (f"/opt/hdfs/nodemanager/usercache/curi/appcache/application_1485248649253_"
            f"{r.randint(1, 200):04d}/blockmgr-{r.randint(10**7, 10**8 - 1):x}-"
            f"{r.randint(1000, 9999)}")


def _metric_name(r: random.Random) -> str:
    return r.choice(("exact_match", "accuracy", "f1", "bleu", "rouge_l", "perplexity"))


def _ckpt(r: random.Random) -> str:
    return f"/scratch/ckpt/run-{r.randint(1, 99)}/step_{r.randint(1, 200) * 500:07d}.pt"


@dataclass(frozen=True)
class Event:
    """A ground-truth event: a template with named parameters, and its relative weight."""

    template: str  # "Received block {blk} of size {n} from {ip}"
    params: dict[str, Param]

    def render(self, r: random.Random) -> str:
        return re.sub(r"\{(\w+)\}", lambda m: self.params[m.group(1)](r), self.template)

    @property
    def truth(self) -> str:
        return re.sub(r"\{\w+\}", "<*>", self.template)


def E(template: str, **params: Param) -> Event:  # noqa: N802 - reads like the table it builds
    return Event(template, params)


@dataclass(frozen=True)
class Source:
    name: str
    header_fields: tuple[str, ...]
    header: Callable[[random.Random, int, int], tuple[str, ...]]  # (rng, line, event)
    layout: str  # how the raw line joins header values and content
    events: tuple[Event, ...]


def _fixed(event: int, options: tuple[str, ...]) -> str:
    """An event's own header value (its component, level...): real events come from one
    place in the code, so their header fields do not vary."""
    return options[(event * 7919 + 13) % len(options)]


def _hdfs_header(r: random.Random, i: int, event: int) -> tuple[str, ...]:
    component = _fixed(event, ("dfs.DataNode$PacketResponder", "dfs.DataNode$DataXceiver",
                               "dfs.FSNamesystem", "dfs.DataNode", "dfs.DataBlockScanner"))
    level = _fixed(event, ("INFO",) * 6 + ("WARN",))
    return ("081109", f"{20 + i // 500:02d}{(i // 10) % 60:02d}{i % 60:02d}",
            str(r.randint(13, 35000)), level, component)


HDFS = Source(
    "HDFS", ("Date", "Time", "Pid", "Level", "Component"), _hdfs_header,
    "{Date} {Time} {Pid} {Level} {Component}: {Content}",
    (
        E("PacketResponder {n} for block {blk} terminating", n=_int(0, 2), blk=_blk),
        E("Received block {blk} of size {n} from {ip}", blk=_blk, n=_int(1000, 67108864),
          ip=lambda r: "/" + _ip(r)),
        E("Receiving block {blk} src: {a} dest: {b}", blk=_blk,
          a=lambda r: f"/{_ip(r)}:{r.randint(30000, 60000)}", b=lambda r: f"/{_ip(r)}:50010"),
        E("BLOCK* NameSystem.addStoredBlock: blockMap updated: {ip} is added to {blk} size {n}",
          ip=lambda r: f"{_ip(r)}:50010", blk=_blk, n=_int(1000, 67108864)),
        E("BLOCK* NameSystem.allocateBlock: {path} {blk}", path=_hdfs_path, blk=_blk),
        E("Verification succeeded for {blk}", blk=_blk),
        E("Deleting block {blk} file {f}", blk=_blk,
          f=lambda r: f"/mnt/hadoop/dfs/data/current/subdir{r.randint(0, 63)}/{_blk(r)}"),
        E("BLOCK* NameSystem.delete: {blk} is added to invalidSet of {ip}", blk=_blk,
          ip=lambda r: f"{_ip(r)}:50010"),
        E("{ip}:Served block {blk} to {to}", ip=lambda r: f"{_ip(r)}:50010", blk=_blk,
          to=lambda r: "/" + _ip(r)),
        E("{ip}:Got exception while serving {blk} to {to}:", ip=lambda r: f"{_ip(r)}:50010",
          blk=_blk, to=lambda r: "/" + _ip(r)),
        E("{ip}:Transmitted block {blk} to {to}", ip=lambda r: f"{_ip(r)}:50010", blk=_blk,
          to=lambda r: f"/{_ip(r)}:50010"),
        E("{ip} Starting thread to transfer block {blk} to {to}",
          ip=lambda r: f"{_ip(r)}:50010", blk=_blk, to=lambda r: f"{_ip(r)}:50010"),
        E("BLOCK* ask {ip} to replicate {blk} to datanode(s) {nodes}",
          ip=lambda r: f"{_ip(r)}:50010", blk=_blk, nodes=_datanodes),
        E("PacketResponder {n} for block {blk} Interrupted.", n=_int(0, 2), blk=_blk),
        E("writeBlock {blk} received exception java.io.IOException: Could not read from stream",
          blk=_blk),
        E("PacketResponder {blk} {n} Exception java.io.IOException: Broken pipe", blk=_blk,
          n=_int(0, 2)),
        E("Unexpected error trying to delete block {blk}. BlockInfo not found in volumeMap.",
          blk=_blk),
        E("BLOCK* NameSystem.addStoredBlock: addStoredBlock request received for {blk} on {ip} "
          "size {n} But it does not belong to any file.", blk=_blk,
          ip=lambda r: f"{_ip(r)}:50010", n=_int(1000, 67108864)),
        E("Adding an already existing block {blk}", blk=_blk),
        E("{ip}:Exception writing block {blk} to mirror {m}", ip=lambda r: f"{_ip(r)}:50010",
          blk=_blk, m=lambda r: f"{_ip(r)}:50010"),
    ),
)


def _bgl_header(r: random.Random, i: int, event: int) -> tuple[str, ...]:
    node = _bgl_node(r)
    t = 1117838570 + i * 7
    return (_fixed(event, ("-",) * 9 + ("APPREAD", "KERNDTLB")), str(t), "2005.06.03", node,
            f"2005-06-03-15.{(i // 60) % 60:02d}.{i % 60:02d}.{r.randint(0, 999999):06d}",
            node, "RAS", _fixed(event, ("KERNEL",) * 8 + ("APP", "MMCS", "DISCOVERY")),
            _fixed(event + 3, ("INFO",) * 6 + ("FATAL", "ERROR", "WARNING", "SEVERE")))


BGL = Source(
    "BGL", ("Label", "Timestamp", "Date", "Node", "Time", "NodeRepeat", "Type", "Component",
            "Level"), _bgl_header,
    "{Label} {Timestamp} {Date} {Node} {Time} {NodeRepeat} {Type} {Component} {Level} {Content}",
    (
        E("instruction cache parity error corrected"),
        E("{n} double-hummer alignment exceptions", n=_int(1, 9999)),
        E("CE sym {n}, at {a}, mask {m}", n=_int(0, 31), a=_hex(8), m=_hex(2)),
        E("generating {core}", core=lambda r: f"core.{r.randint(1, 9999)}"),
        E("total of {n} ddr error(s) detected and corrected", n=_int(1, 30)),
        E("{n} ddr errors(s) detected and corrected on rank {k}, symbol {s}, bit {b}",
          n=_int(1, 30), k=_int(0, 1), s=_int(0, 31), b=_int(0, 7)),
        E("ciod: failed to read message prefix on control stream (CioStream socket to {ip})",
          ip=_cio),
        E("ciod: Error reading message prefix after LOGIN_MESSAGE on CioStream socket to {ip}: "
          "Link has been severed",
          ip=_cio),
        E("ciod: LOGIN chdir({p}) failed: No such file or directory",
          p=lambda r: f"/p/gb1/{_user(r)}/{r.choice(['RAPTOR', 'miranda', 'ALE3D'])}/"
                      f"{r.randint(1000, 9999)}"),
        E("ciod: LOGIN chdir({p}) failed: Permission denied",
          p=lambda r: f"/home/{_user(r)}/run{r.randint(1, 99)}"),
        E("data TLB error interrupt"),
        E("data storage interrupt"),
        E("machine check interrupt (bit={b}): L2 dcache unit data parity error", b=_hex(2)),
        E("rts: kernel terminated for reason {n}", n=_int(1001, 1004)),
        E("rts panic! - stopping execution"),
        E("program interrupt: fp cr field .............{n}", n=_int(0, 1)),
        E("iar {a} dear {b}", a=_hex(8), b=_hex(8)),
        E("Lustre mount FAILED : {h} : point {p}", h=lambda r: f"bglio{r.randint(1, 999)}",
          p=lambda r: f"/p/gb{r.randint(1, 2)}"),
        E("NFS Mount failed on {h}, slept {n} seconds, retrying ({k})",
          h=lambda r: f"bglio{r.randint(1, 999)}", n=_int(30, 60), k=_int(1, 5)),
        E("MidplaneSwitchController performing bit sparing on {node} bit {b}", node=_bgl_node,
          b=_int(0, 7)),
        E("critical input interrupt (unit={u} bit={b}): warning for torus {d} wire, suppressing "
          "further interrupts of same type", u=_hex(2), b=_hex(2),
          d=_choice("x+", "x-", "y+", "y-", "z+", "z-")),
        E("Node card VPD check: {x} node in processor card slot {s} do not match. VPD ecid {a}, "
          "found {b}", x=_choice("U01", "U11"), s=_choice("J12", "J13", "J14"),
          a=_hex(26), b=_hex(26)),
        E("idoproxydb hit ASSERT condition: ASSERT expression={e} Source file={f} Source line={n} "
          "Function={fn}", e=_int(0, 1), f=_choice("idotransportmgr.cpp", "idoproxy.cpp"),
          n=_int(100, 2000),
          fn=_choice("int IdoTransportMgr::SendPacket(IdoUdpMgr*, BglCtlPavTrace*)",
                     "void IdoProxy::run()")),
        E("{n} floating point alignment exceptions", n=_int(1, 9999)),
        E("fpr{k}={a} {b} {c} {d}", k=_int(0, 31), a=_hex(8), b=_hex(8), c=_hex(8), d=_hex(8)),
        E("shutdown complete"),
        E("ciodb has been restarted."),
        E("{n} torus receiver {d} input pipe error(s) (dcr {a}) detected and corrected",
          n=_int(1, 30), d=_choice("x+", "y-", "z+"), a=_hex(4)),
    ),
)


def _ssh_header(r: random.Random, i: int, event: int) -> tuple[str, ...]:
    return ("Dec", str(10 + i // 400),
            f"{6 + i // 100 % 18:02d}:{i % 60:02d}:{r.randint(0, 59):02d}", "LabSZ",
            str(r.randint(24000, 29999)))


OPENSSH = Source(
    "OpenSSH", ("Date", "Day", "Time", "Component", "Pid"), _ssh_header,
    "{Date} {Day} {Time} {Component} sshd[{Pid}]: {Content}",
    (
        E("reverse mapping checking getaddrinfo for {h} [{ip}] failed - POSSIBLE BREAK-IN "
          "ATTEMPT!", h=_hostname, ip=_public_ip),
        E("Invalid user {u} from {ip}", u=_user, ip=_public_ip),
        E("input_userauth_request: invalid user {u} [preauth]", u=_user),
        E("pam_unix(sshd:auth): check pass; user unknown"),
        E("pam_unix(sshd:auth): authentication failure; logname= uid={a} euid={b} tty=ssh ruser= "
          "rhost={h}", a=_choice("0"), b=_choice("0"), h=lambda r: _public_ip(r)
          if r.random() < 0.6 else _hostname(r)),
        E("pam_unix(sshd:auth): authentication failure; logname= uid={a} euid={b} tty=ssh ruser= "
          "rhost={h}  user={u}", a=_choice("0"), b=_choice("0"), h=_public_ip, u=_user),
        E("Failed password for invalid user {u} from {ip} port {p} ssh2", u=_user, ip=_public_ip,
          p=_int(1024, 65535)),
        E("Failed password for {u} from {ip} port {p} ssh2", u=_user, ip=_public_ip,
          p=_int(1024, 65535)),
        E("Accepted password for {u} from {ip} port {p} ssh2", u=_user, ip=_public_ip,
          p=_int(1024, 65535)),
        E("Received disconnect from {ip}: {n}: Bye Bye [preauth]", ip=_public_ip, n=_choice("11")),
        E("Received disconnect from {ip}: {n}: Closed due to user request. [preauth]",
          ip=_public_ip, n=_choice("11")),
        E("error: Received disconnect from {ip}: {n}: No more user authentication methods "
          "available. [preauth]", ip=_public_ip, n=_choice("3")),
        E("Connection closed by {ip} [preauth]", ip=_public_ip),
        E("Connection reset by {ip} port {p} [preauth]", ip=_public_ip, p=_int(1024, 65535)),
        E("pam_unix(sshd:session): session opened for user {u} by (uid={n})", u=_user,
          n=_choice("0")),
        E("pam_unix(sshd:session): session closed for user {u}", u=_user),
        E("PAM {n} more authentication failures; logname= uid={a} euid={b} tty=ssh ruser= "
          "rhost={h}", n=_int(1, 5), a=_choice("0"), b=_choice("0"), h=_public_ip),
        E("PAM {n} more authentication failures; logname= uid={a} euid={b} tty=ssh ruser= "
          "rhost={h}  user={u}", n=_int(1, 5), a=_choice("0"), b=_choice("0"), h=_public_ip,
          u=_user),
        E("Did not receive identification string from {ip}", ip=_public_ip),
        E("message repeated {n} times: [ Failed password for {u} from {ip} port {p} ssh2]",
          n=_int(2, 5), u=_user, ip=_public_ip, p=_int(1024, 65535)),
        E("Disconnecting: Too many authentication failures for {u} [preauth]", u=_user),
        E("fatal: Read from socket failed: Connection reset by peer [preauth]"),
        E("Address {ip} maps to {h}, but this does not map back to the address - POSSIBLE "
          "BREAK-IN ATTEMPT!", ip=_public_ip, h=_hostname),
        E("Bad protocol version identification '{v}' from {ip} port {p}",
          v=_choice("GET / HTTP/1.1", "SSH-1.5-NmapNSE", "\\003"), ip=_public_ip,
          p=_int(1024, 65535)),
        E("Server listening on {a} port {p}.", a=_choice("0.0.0.0", "::"), p=_choice("22")),
    ),
)


def _spark_header(r: random.Random, i: int, event: int) -> tuple[str, ...]:
    component = _fixed(event, ("executor.Executor", "storage.BlockManager", "storage.MemoryStore",
                          "broadcast.TorrentBroadcast", "spark.MapOutputTrackerWorker",
                          "executor.CoarseGrainedExecutorBackend", "spark.SecurityManager",
                          "storage.ShuffleBlockFetcherIterator", "rdd.HadoopRDD",
                          "util.ShutdownHookManager"))
    return ("17/06/09", f"20:{10 + i // 200:02d}:{i % 60:02d}", "INFO", component)


SPARK = Source(
    "Spark", ("Date", "Time", "Level", "Component"), _spark_header,
    "{Date} {Time} {Level} {Component}: {Content}",
    (
        E("Running task {t} in stage {s} (TID {n})", t=_float(0, 40, 1), s=_float(0, 20, 1),
          n=_int(0, 4000)),
        E("Finished task {t} in stage {s} (TID {n}). {b} bytes result sent to driver",
          t=_float(0, 40, 1), s=_float(0, 20, 1), n=_int(0, 4000), b=_int(900, 3000)),
        E("Got assigned task {n}", n=_int(0, 4000)),
        E("Found block {b} locally", b=lambda r: f"rdd_{r.randint(0, 40)}_{r.randint(0, 40)}"),
        E("Partition {b} not found, computing it",
          b=lambda r: f"rdd_{r.randint(0, 40)}_{r.randint(0, 40)}"),
        E("Started reading broadcast variable {n}", n=_int(0, 40)),
        E("Reading broadcast variable {n} took {t} ms", n=_int(0, 40), t=_int(1, 400)),
        E("Block {b} stored as bytes in memory (estimated size {s} KB, free {f} KB)",
          b=lambda r: f"broadcast_{r.randint(0, 40)}_piece0", s=_size_kb, f=_size_kb),
        E("Block {b} stored as values in memory (estimated size {s} KB, free {f} KB)",
          b=lambda r: f"broadcast_{r.randint(0, 40)}", s=_size_kb, f=_size_kb),
        E("Block {b} stored as values in memory (estimated size {s} B, free {f} KB)",
          b=lambda r: f"rdd_{r.randint(0, 40)}_{r.randint(0, 40)}", s=_int(16, 900), f=_size_kb),
        E("Input split: {u}", u=lambda r: f"hdfs://10.10.34.11:9000/pjhe/test/{r.randint(1, 9)}/"
                                          f"part-{r.randint(0, 99):05d}:0+"
                                          f"{r.randint(1, 9) * 1000000}"),
        E("Getting {n} non-empty blocks out of {m} blocks", n=_int(0, 50), m=_int(50, 60)),
        E("Started {n} remote fetches in {t} ms", n=_int(0, 20), t=_int(1, 90)),
        E("Don't have map outputs for shuffle {n}, fetching them", n=_int(0, 20)),
        E("Doing the fetch; tracker endpoint = NettyRpcEndpointRef(spark://MapOutputTracker@{h}:"
          "{p})", h=_spark_host, p=_int(30000, 60000)),
        E("Got the output locations"),
        E("mapred.{k} is deprecated. Instead, use mapreduce.{v}",
          k=_choice("tip.id", "task.id", "task.is.map", "task.partition", "job.id"),
          v=_choice("task.id", "task.attempt.id", "task.ismap", "task.partition", "job.id")),
        E("Changing view acls to: {u}", u=_choice("yarn,curi", "curi")),
        E("Changing modify acls to: {u}", u=_choice("yarn,curi", "curi")),
        E("SecurityManager: authentication disabled; ui acls disabled; users with view "
          "permissions: Set({a}); users with modify permissions: Set({b})",
          a=_choice("yarn, curi", "curi"), b=_choice("yarn, curi", "curi")),
        E("Successfully started service '{s}' on port {p}.",
          s=_choice("sparkExecutorActorSystem", "org.apache.spark.network.netty."
                    "NettyBlockTransferService"), p=_int(30000, 60000)),
        E("Registered signal handlers for [TERM, HUP, INT]"),
        E("Starting executor ID {n} on host {h}", n=_int(1, 30), h=_spark_host),
        E("MemoryStore started with capacity {s} MB", s=_float(10, 20000, 1)),
        E("Created local directory at {d}", d=_dir),
        E("Connecting to driver: spark://CoarseGrainedScheduler@{ip}:{p}", ip=_ip,
          p=_int(30000, 60000)),
        E("Successfully registered with driver"),
        E("Executor is trying to kill task {t} in stage {s} (TID {n})", t=_float(0, 40, 1),
          s=_float(0, 20, 1), n=_int(0, 4000)),
        E("Driver commanded a shutdown"),
        E("Shutdown hook called"),
        E("Deleting directory {d}", d=_dir),
    ),
)


def _train_header(r: random.Random, i: int, event: int) -> tuple[str, ...]:
    return ("2024-05-01", f"12:{i // 60 % 60:02d}:{i % 60:02d},{r.randint(0, 999):03d}",
            _fixed(event, ("INFO",) * 9 + ("WARNING",)), _fixed(event, ("train", "trainer",
                                                                         "data")))


CONFIG_KEYS = ("lr", "batch_size", "warmup_steps", "weight_decay", "seed", "max_steps",
               "grad_clip", "model", "dataset", "precision")

TRAINING = Source(
    "Training", ("Date", "Time", "Level", "Component"), _train_header,
    "{Date} {Time} - {Component} - {Level} - {Content}",
    (
        E("[rank{r}] step {k} | loss {l} | grad_norm {g} | lr {lr} | {ms} ms/step", r=_int(0, 7),
          k=_int(1, 5000), l=_float(1.5, 4, 4), g=_float(0.1, 3, 3),
          lr=lambda r: f"{r.uniform(1e-5, 1e-3):.3e}", ms=_float(200, 900, 1)),
        E("step {k}/{n} loss {l} lr {lr} ({t}s)", k=_int(1, 5000), n=_choice("5000"),
          l=_float(1.5, 4, 4), lr=lambda r: f"{r.uniform(1e-5, 1e-3):.2e}", t=_float(1, 900, 1)),
        E("eval step {k}: {m} {v}", k=lambda r: str(r.randint(1, 50) * 100), m=_metric_name,
          v=_float(0, 1, 3)),
        E("Saving checkpoint to {p}", p=_ckpt),
        E("Saved checkpoint to {p} in {t}s", p=_ckpt, t=_float(0.5, 30, 1)),
        E("Resuming from checkpoint {p} at step {k}", p=_ckpt, k=_int(500, 5000)),
        E("Loading dataset {d} split {s} from {p}", d=_choice("c4", "fineweb", "wikitext-103",
                                                               "openwebtext"),
          s=_choice("train", "validation"), p=lambda r: f"/data/{r.randint(1, 9)}/shards"),
        E("Model has {n} parameters ({m} trainable)", n=_int(10**6, 10**9), m=_int(10**6, 10**9)),
        E("torch.distributed initialized: backend={b} world_size={w} rank={k}",
          b=_choice("nccl", "gloo"), w=_choice("2", "4", "8", "16"), k=_int(0, 15)),
        E("Gradient overflow. Skipping step, loss scaler {n} reducing loss scale to {s}",
          n=_int(0, 1), s=lambda r: f"{2.0 ** r.randint(8, 16)}"),
        E("Epoch {e} finished in {t} ({n} steps)", e=_int(1, 20),
          t=lambda r: f"{r.randint(1, 59)}m{r.randint(0, 59)}s", n=_int(100, 900)),
        E("{h}:{p}:{q} [{g}] NCCL INFO Channel {c}/{d} : {a}[{b}] -> {x}[{y}] via P2P/IPC",
          h=lambda r: f"node-{r.randint(1, 8)}", p=_int(1000, 9999), q=_int(1000, 9999),
          g=_int(0, 7), c=_int(0, 31), d=_choice("32"), a=_int(0, 7), b=_int(0, 7),
          x=_int(0, 7), y=_int(0, 7)),
        E("{h}:{p}:{q} [{g}] NCCL INFO Using network {n}", h=lambda r: f"node-{r.randint(1, 8)}",
          p=_int(1000, 9999), q=_int(1000, 9999), g=_int(0, 7), n=_choice("IB", "Socket")),
        E("Warning: {f} is deprecated and will be removed in a future release; use {g} instead",
          f=_choice("torch.cuda.amp.autocast", "resume_download", "torch.distributed._shard"),
          g=_choice("torch.amp.autocast", "force_download", "torch.distributed.checkpoint")),
        E("data loader: {n} workers, prefetch factor {p}, pin_memory={b}", n=_int(1, 16),
          p=_int(1, 8), b=_choice("True", "False")),
        E("throughput: {t} tokens/s, MFU {m}%", t=_int(10000, 900000), m=_float(10, 60, 1)),
        E("wandb: Syncing run {n}", n=lambda r: f"{r.choice(['brisk', 'calm', 'eager'])}-"
                                                f"{r.choice(['river', 'sun', 'moon'])}-"
                                                f"{r.randint(1, 99)}"),
        E("early stopping: {m} did not improve for {n} evals", m=_metric_name, n=_int(1, 10)),
        *(E(f"  {key}: {{v}}", v=_choice("3e-4", "32", "2000", "0.1", "1234", "100000", "1.0",
                                          "gpt2-small", "fineweb", "bf16"))
          for key in CONFIG_KEYS),
    ),
)

SOURCES = (HDFS, BGL, OPENSSH, SPARK, TRAINING)


def generate(source: Source, seed: int, lines: int = LINES) -> list[dict[str, str]]:
    """`lines` rows: the header fields, Content, EventId, EventTemplate and the raw line.

    Event frequencies are Zipf-like (weight 1/rank^1.2 in a seed-shuffled order); every
    event occurs at least once.
    """
    r = random.Random(f"{source.name}:{seed}")
    order = list(range(len(source.events)))
    r.shuffle(order)
    weights = [0.0] * len(order)
    for rank, index in enumerate(order, start=1):
        weights[index] = 1.0 / rank**1.2
    picks = list(range(len(source.events)))
    picks += r.choices(range(len(source.events)), weights=weights, k=lines - len(picks))
    r.shuffle(picks)
    rows = []
    for i, index in enumerate(picks):
        event = source.events[index]
        header = dict(zip(source.header_fields, source.header(r, i, index), strict=True))
        content = event.render(r)
        raw = source.layout.format(**header, Content=content)
        rows.append({"LineId": str(i + 1), **header, "Content": content,
                     "EventId": f"E{index + 1}", "EventTemplate": event.truth, "raw": raw})
    return rows


def write(directory: Path, seed: int = 0) -> list[Path]:
    """Write ``<Source>_2k.log`` and ``<Source>_2k.log_structured.csv`` for every source."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for source in SOURCES:
        rows = generate(source, seed)
        log = directory / f"{source.name}_2k.log"
        log.write_text("".join(row["raw"] + "\n" for row in rows), encoding="utf-8")
        structured = directory / f"{source.name}_2k.log_structured.csv"
        fields = ["LineId", *source.header_fields, "Content", "EventId", "EventTemplate"]
        with open(structured, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
        written += [log, structured]
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for path in write(args.out, args.seed):
        print(path)
