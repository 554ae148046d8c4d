/*
 * agent_main.c - 'corral agent': flags, start-up, and the reconcile loop.
 *
 * The loop owns the jobs. It wakes on a child's exit (signalfd SIGCHLD), a
 * new desired state (the poller's pipe), a stop signal, or its timers
 * (1 s: sample the GPUs, judge health, SIGKILL past a grace period, notice
 * adopted jobs ending; heartbeat: send status). After each wake it
 * reconciles: run what the desired state lists and is not running, stop
 * what it does not list or marks stop, report exits at once (a status sent
 * the moment something ended is what makes short jobs fast end to end),
 * and forget an exit once the controller has stopped listing the job.
 */
#include "cr_agent.h"

#include "agent_int.h"
#include "cr_alloc.h"
#include "cr_auth.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_metric.h"
#include "cr_parse.h"
#include "cr_task_env.h"
#include "cr_imgref.h"
#include "cr_time.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <sodium.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: corral agent --server URL --join-token FILE [options]\n"
        "       corral agent --config FILE [options]\n"
        "\n"
        "  --config FILE         JSON file of these flags, '_' for '-' (/etc/corral/agent.json:\n"
        "                        {\"server\": URL, \"join_token_file\": FILE, ...}); flags win\n"
        "  --server URL[,URL..]  controller, e.g. http://127.0.0.1:8620; several: an HA\n"
        "                        trio, the leader is followed (docs/operations.md)\n"
        "  --join-token FILE     file holding a bootstrap token (or set CORRAL_JOIN_TOKEN);\n"
        "                        not needed once STATE-DIR/node.cred holds this node's\n"
        "                        credential (written at the first registration)\n"
        "  --ca-file FILE        PEM CA bundle to verify an https:// controller\n"
        "  --tls-cert FILE       serve HTTPS (logs, metrics) with this PEM certificate\n"
        "  --tls-key FILE        its private key (PEM)\n"
        "  --tls-client-ca FILE  mutual TLS: every caller but /v1/health must show a client\n"
        "                        certificate signed by this CA (the controller's\n"
        "                        --tls-client-cert; Prometheus' tls_config)\n"
        "  --metrics-token-file FILE\n"
        "                        /metrics (job and tenant labels) asks this bearer token;\n"
        "                        without it /metrics is open to all who reach the port\n"
        "  --node NAME           node name (default: host name)\n"
        "  --rack R              rack (topology domain)\n");
    fprintf(
        f,
        "  --gpus SPEC           sim:SPEC | sim:FILE | nvml | auto (default auto)\n"
        "  --share-gpus all|I,J  GPUs offered to fractional tasks (--gpu-fraction): MPS limits\n"
        "                        where an MPS daemon runs, else time-slicing (default none)\n"
        "  --mps-control PATH|none  MPS control program run per shared GPU (default with\n"
        "                        nvml: nvidia-cuda-mps-control when installed; sim: none)\n"
        "  --mps-dir DIR         MPS pipe directories (default /run/corral-mps/NODE as root)\n"
        "  --mig-dynamic all|I,J MIG GPUs whose layout the controller may change: the agent\n"
        "                        destroys idle instances and creates new ones (default none)\n"
        "                        e.g. sim:'8xH100 SXM' or sim:'4xA30,mig=1g.6gb:4'\n"
        "  --listen ADDR:PORT    metrics and logs server (default 127.0.0.1:8621; port 0: any)\n"
        "  --advertise ADDR      address told to the controller (default: the listen address;\n"
        "                        with 0.0.0.0, the address this host reaches the controller from)\n"
        "  --state-dir DIR       job records and logs (default /var/lib/corral/agent)\n"
        "  --faults FILE         sim fault file (default STATE-DIR/faults)\n"
        "  --xid-hold DUR        an XID keeps a GPU out this long (default 60s)\n"
        "  --hot-c C             a GPU at C degrees leaves the pool (default 90)\n"
        "  --wait DUR            long-poll wait (default 30s)\n"
        "  --run-for DUR         exit after this long (demos, benchmarks)\n"
        "  --cgroup auto|off|DIR each job in its own cgroup v2 under DIR (default auto:\n"
        "                        /sys/fs/cgroup or /sys/fs/cgroup/unified when writable)\n"
        "  --cgroup-v1 auto|off  use the cgroup v1 devices, memory and cpu controllers where\n"
        "                        mounted (default auto); see docs/isolation.md\n"
        "  --job-pid-namespace auto|off\n"
        "                        each plain-process job in its own PID and mount namespace\n"
        "                        with its own /proc (default auto: where the kernel allows)\n"
        "  --dev-dir DIR         GPU device nodes (default /dev; sim: STATE-DIR.dev, made\n"
        "                        with mknod as placeholders of major 195)\n"
        "  --container-runtime auto|runc|crun\n"
        "                        OCI runtime podman uses for jobs with an image (default\n"
        "                        auto: runc when installed, else crun); docs/containers.md\n"
        "  --podman PATH         the podman program (default podman, from PATH)\n"
        "  --image-cache-max SIZE  remove the least recently used images the jobs used\n"
        "                        past this total (e.g. 200G; default 0: no cap)\n"
        "  --image-registries LIST  registries (host[:port], comma-separated) the node may\n"
        "                        pull job images from (default none: only images in the\n"
        "                        node's store or loaded from a job's image archive)\n"
        "  --require-isolation F,...  fences this node must enforce (uid, pidns, devices,\n"
        "                        memory, cpu, pids): when one is unavailable the agent\n"
        "                        registers but takes no jobs (the node is drained with why)\n"
        "  --log-max-bytes N     cap of each job log file under STATE-DIR/logs (bytes or\n"
        "                        64M; default 64M; 0: no cap): its head is kept, an event\n"
        "                        says so\n");
    fprintf(f,
            "  --data-cache DIR      the node's data cache for jobs' --data (default\n"
            "                        STATE-DIR/data; docs/data.md)\n"
            "  --data-cache-max SIZE its cap (bytes or 500G; default 64G; 0: no data cache):\n"
            "                        least recently used entries no job holds are evicted\n"
            "  --data-s3-endpoint URL  where s3:// objects are fetched (path style; default\n"
            "                        https://s3.amazonaws.com; keys from AWS_ACCESS_KEY_ID and\n"
            "                        AWS_SECRET_ACCESS_KEY)\n"
            "  --data-s3-region R    the SigV4 region (default us-east-1)\n"
            "  --data-verify SECONDS hash a cached entry again at a job's use when its file\n"
            "                        changed or its last hash is older (default 86400; 0: always)\n"
            "  --kill-on-exit        stop the jobs when the agent exits (default: leave them\n"
            "                        running, a restarted agent re-adopts them)\n"
            "  --no-dcgm             no DCGM-named series on /metrics (the real dcgm-exporter\n"
            "                        runs beside the agent); corral_* series stay\n"
            "  --dcgm-job-map DIR    write dcgm-exporter's job mapping files into DIR (its\n"
            "                        --hpc-job-mapping-dir): one file per GPU index, job ids\n"
            "  --task-env K=V        set K=V for every task run here, e.g. NCCL_SOCKET_IFNAME=ib0\n"
            "                        or NCCL_IB_HCA=mlx5_0 (repeatable; a job's own env wins)\n"
            "  --rdzv-ports LO-HI    ports for a gang's rendezvous (MASTER_PORT) when this node\n"
            "                        holds rank 0 (default 29500-29999)\n"
            "  --label K[=V]         a node label jobs select with --constraint (repeatable)\n");
    fprintf(f,
            "  --spot-notice-file FILE  a spot reclaim notice: when FILE appears (holding the\n"
            "                        seconds left, default 30) the controller requeues this\n"
            "                        node's jobs with their checkpoint signal (docs/pools.md)\n");
}

static int flag_error(const char *flag, const char *msg)
{
    fprintf(stderr, "corral agent: %s: %s\n", flag, msg);
    return 2;
}

/* The bootstrap token: from a file, else the argument itself, which is then
 * wiped from argv (it would show in ps and /proc/PID/cmdline) with a warning. */
static char *read_token(char *arg)
{
    FILE *f = fopen(arg, "r");
    if (!f) {
        char *t = cr_strdup(arg);
        if (strncmp(arg, "crl_", 4) == 0) {
            fprintf(stderr, "corral agent: warning: --join-token given inline: use a file or "
                            "CORRAL_JOIN_TOKEN (wiped from argv now)\n");
        }
        memset(arg, 'x', strlen(arg));
        return t;
    }
    /* A token file others can read is a token others have: tighten it
     * (ours) or say so (somebody else's). Jobs run as other users. */
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && (sb.st_mode & 077) != 0) {
        if (sb.st_uid == geteuid() && fchmod(fileno(f), sb.st_mode & 0600) == 0) {
            cr_warn("agent: %s was readable by others: now mode 0600", arg);
        } else {
            cr_warn("agent: %s is readable by others (mode %o): jobs may read the join token", arg,
                    (unsigned)(sb.st_mode & 0777));
        }
    }
    char buf[512] = "";
    if (!fgets(buf, sizeof buf, f)) {
        buf[0] = '\0';
    }
    fclose(f);
    buf[strcspn(buf, "\r\n")] = '\0';
    return cr_strdup(buf);
}

/*
 * The local address this host uses to reach the controller: connect a UDP
 * socket towards it (no packet is sent) and read the address the kernel
 * picked. That is the address peers on the same network can use.
 */
static int local_addr_towards(const char *url, char *out, size_t len)
{
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    char host[256];
    size_t n = strcspn(h, ":/");
    if (n == 0 || n >= sizeof host) {
        return CR_EINVAL;
    }
    memcpy(host, h, n);
    host[n] = '\0';
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_DGRAM;
    if (getaddrinfo(host, "9", &hints, &ai) != 0 || !ai) {
        return CR_ENOENT;
    }
    int rc = CR_EIO, fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&me, &ml) == 0 &&
        inet_ntop(AF_INET, &me.sin_addr, out, (socklen_t)len)) {
        rc = 0;
    }
    if (fd >= 0) {
        close(fd);
    }
    freeaddrinfo(ai);
    return rc;
}

static int is_loopback(const char *host)
{
    return strncmp(host, "127.", 4) == 0 || strcmp(host, "localhost") == 0 ||
           strcmp(host, "::1") == 0 || strcmp(host, "[::1]") == 0;
}

/* Whether the controller URL names a loopback host. */
static int server_is_loopback(const char *url)
{
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    char host[256];
    size_t n = *h == '[' ? strcspn(h, "]") + 1 : strcspn(h, ":/");
    if (n == 0 || n >= sizeof host) {
        return 0;
    }
    memcpy(host, h, n);
    host[n] = '\0';
    return is_loopback(host);
}

enum {
    OPT_MPS_CONTROL = 1000,
    OPT_MPS_DIR,
    OPT_MIG_DYNAMIC,
    OPT_JOB_PIDNS,
    OPT_LOG_MAX,
    OPT_REQUIRE_ISO,
    OPT_DATA_CACHE,
    OPT_DATA_CACHE_MAX,
    OPT_S3_ENDPOINT,
    OPT_S3_REGION,
    OPT_DATA_VERIFY,
    OPT_SPOT_NOTICE
};

static int parse_flags(int argc, char **argv, agent_cfg *c, char **faults_owned)
{
    static const struct option opts[] = {
        {"server", required_argument, NULL, 's'},
        {"join-token", required_argument, NULL, 'j'},
        {"node", required_argument, NULL, 'n'},
        {"rack", required_argument, NULL, 'r'},
        {"gpus", required_argument, NULL, 'g'},
        {"share-gpus", required_argument, NULL, 'S'},
        {"mps-control", required_argument, NULL, OPT_MPS_CONTROL},
        {"mps-dir", required_argument, NULL, OPT_MPS_DIR},
        {"mig-dynamic", required_argument, NULL, OPT_MIG_DYNAMIC},
        {"job-pid-namespace", required_argument, NULL, OPT_JOB_PIDNS},
        {"listen", required_argument, NULL, 'l'},
        {"advertise", required_argument, NULL, 'a'},
        {"state-dir", required_argument, NULL, 'd'},
        {"faults", required_argument, NULL, 'f'},
        {"xid-hold", required_argument, NULL, 'x'},
        {"hot-c", required_argument, NULL, 't'},
        {"wait", required_argument, NULL, 'w'},
        {"run-for", required_argument, NULL, 'R'},
        {"kill-on-exit", no_argument, NULL, 'k'},
        {"cgroup", required_argument, NULL, 'c'},
        {"cgroup-v1", required_argument, NULL, 'V'},
        {"dev-dir", required_argument, NULL, 'D'},
        {"container-runtime", required_argument, NULL, 'O'},
        {"podman", required_argument, NULL, 'Q'},
        {"image-cache-max", required_argument, NULL, 'I'},
        {"image-registries", required_argument, NULL, 'G'},
        {"log-max-bytes", required_argument, NULL, OPT_LOG_MAX},
        {"data-cache", required_argument, NULL, OPT_DATA_CACHE},
        {"data-cache-max", required_argument, NULL, OPT_DATA_CACHE_MAX},
        {"data-s3-endpoint", required_argument, NULL, OPT_S3_ENDPOINT},
        {"data-s3-region", required_argument, NULL, OPT_S3_REGION},
        {"data-verify", required_argument, NULL, OPT_DATA_VERIFY},
        {"require-isolation", required_argument, NULL, OPT_REQUIRE_ISO},
        {"spot-notice-file", required_argument, NULL, OPT_SPOT_NOTICE},
        {"ca-file", required_argument, NULL, 'C'},
        {"tls-cert", required_argument, NULL, 'T'},
        {"tls-key", required_argument, NULL, 'K'},
        {"tls-client-ca", required_argument, NULL, 'A'},
        {"metrics-token-file", required_argument, NULL, 'm'},
        {"no-dcgm", no_argument, NULL, 'N'},
        {"dcgm-job-map", required_argument, NULL, 'M'},
        {"task-env", required_argument, NULL, 'E'},
        {"rdzv-ports", required_argument, NULL, 'P'},
        {"label", required_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static char host[256];
    const char *listen = "127.0.0.1:8621";
    int64_t v;
    cr_gpu_health_cfg_default(&c->health);
    c->wait_s = 30;
    c->log_max_bytes = INT64_C(64) << 20;
    c->data_cache_max = INT64_C(64) << 30;
    c->data_verify_s = 86400;
    c->gpus = "auto";
    c->rack = "";
    c->state_dir = "/var/lib/corral/agent";
    c->cgroup = "auto";
    c->cgroup_v1 = "auto";
    c->job_pidns = 1;
    c->rdzv_lo = 29500;
    c->rdzv_hi = 29999;
    c->ctr_runtime = "auto";
    c->podman = "podman";
    optind = 1;
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case 's':
            c->server = optarg;
            break;
        case 'j':
            free(c->join_token);
            c->join_token = read_token(optarg);
            break;
        case 'n':
            c->node = optarg;
            break;
        case 'r':
            c->rack = optarg;
            break;
        case 'g':
            c->gpus = optarg;
            break;
        case 'S':
        case OPT_MIG_DYNAMIC: {
            uint64_t *mask = o == 'S' ? &c->share_mask : &c->mig_dynamic;
            if (strcmp(optarg, "all") == 0) {
                *mask = UINT64_MAX;
                break;
            }
            *mask = 0;
            for (const char *p = optarg; *p;) {
                char *end = NULL;
                long i = strtol(p, &end, 10);
                if (end == p || i < 0 || i > 63 || (*end && *end != ',')) {
                    return flag_error(o == 'S' ? "--share-gpus" : "--mig-dynamic",
                                      "want all or GPU indexes 0..63, e.g. 0,1");
                }
                *mask |= UINT64_C(1) << i;
                p = *end ? end + 1 : end;
            }
            break;
        }
        case OPT_MPS_CONTROL:
            c->mps_control = optarg;
            break;
        case OPT_JOB_PIDNS:
            if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "off") != 0) {
                return flag_error("--job-pid-namespace", "want auto or off");
            }
            c->job_pidns = strcmp(optarg, "auto") == 0;
            break;
        case OPT_MPS_DIR:
            if (optarg[0] != '/' || strlen(optarg) > 400) {
                return flag_error("--mps-dir", "want an absolute directory path (up to 400 bytes)");
            }
            c->mps_dir = optarg;
            break;
        case 'l':
            listen = optarg;
            break;
        case 'a':
            c->advertise = optarg;
            break;
        case 'd':
            c->state_dir = optarg;
            break;
        case 'f':
            c->faults = optarg;
            break;
        case 'x':
            if (cr_duration_parse(optarg, &c->health.xid_hold_ns) < 0) {
                return flag_error("--xid-hold", "want a duration such as 60s");
            }
            break;
        case 't':
            if (cr_parse_i64(optarg, 30, 200, &v) < 0) {
                return flag_error("--hot-c", "want degrees C, 30..200");
            }
            c->health.hot_c = (int)v;
            c->health.cool_c = (int)v - 5;
            break;
        case 'w':
            if (cr_duration_parse(optarg, &v) < 0 || v < CR_NS_PER_SEC || v > 600 * CR_NS_PER_SEC) {
                return flag_error("--wait", "want a duration 1s..10m");
            }
            c->wait_s = v / CR_NS_PER_SEC;
            break;
        case 'R':
            if (cr_duration_parse(optarg, &c->run_for_ns) < 0 || c->run_for_ns <= 0) {
                return flag_error("--run-for", "want a duration such as 2m");
            }
            break;
        case 'k':
            c->kill_on_exit = 1;
            break;
        case 'c':
            c->cgroup = optarg;
            break;
        case 'V':
            if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "off") != 0) {
                return flag_error("--cgroup-v1", "want auto or off");
            }
            c->cgroup_v1 = optarg;
            break;
        case 'D':
            if (optarg[0] != '/') {
                return flag_error("--dev-dir", "want an absolute directory");
            }
            c->dev_dir = optarg;
            break;
        case 'O':
            if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "runc") != 0 &&
                strcmp(optarg, "crun") != 0) {
                return flag_error("--container-runtime", "want auto, runc or crun");
            }
            c->ctr_runtime = optarg;
            break;
        case 'Q':
            if (!*optarg || strlen(optarg) > 255) {
                return flag_error("--podman", "want a program name or path");
            }
            c->podman = optarg;
            break;
        case 'I':
            if (cr_parse_bytes(optarg, &c->image_cache_max) != 0 || c->image_cache_max < 0) {
                return flag_error("--image-cache-max", "want a size such as 200G (0: no cap)");
            }
            break;
        case 'G':
            /* Comma-separated, repeatable; every entry a registry as in a
             * reference (cr_imgref.h). */
            for (char *save = NULL, *r = strtok_r(optarg, ",", &save); r;
                 r = strtok_r(NULL, ",", &save)) {
                if (!cr_imgref_registry_ok(r) || c->nregistries >= 256) {
                    return flag_error("--image-registries",
                                      "want registries host[:port] separated by ',' (up to 256)");
                }
                c->registries =
                    cr_reallocarray(c->registries, c->nregistries + 1, sizeof *c->registries);
                c->registries[c->nregistries++] = r;
            }
            break;
        case OPT_REQUIRE_ISO: {
            char why[160];
            if (cr_iso_require_check(optarg, why, sizeof why) != 0) {
                return flag_error("--require-isolation", why);
            }
            c->require_iso = optarg;
            break;
        }
        case OPT_DATA_CACHE:
            if (!*optarg || optarg[0] != '/' || strlen(optarg) > 900) {
                return flag_error("--data-cache", "want an absolute directory path");
            }
            c->data_cache = optarg;
            break;
        case OPT_DATA_CACHE_MAX:
            if (cr_parse_i64(optarg, 0, INT64_C(1) << 50, &c->data_cache_max) != 0 &&
                (cr_parse_bytes(optarg, &c->data_cache_max) != 0 ||
                 c->data_cache_max > INT64_C(1) << 50)) {
                return flag_error("--data-cache-max",
                                  "want bytes or a size such as 500G (0: no data cache)");
            }
            break;
        case OPT_S3_ENDPOINT:
            if (strncmp(optarg, "http://", 7) != 0 && strncmp(optarg, "https://", 8) != 0) {
                return flag_error("--data-s3-endpoint", "want an http:// or https:// URL");
            }
            c->s3_endpoint = optarg;
            break;
        case OPT_DATA_VERIFY:
            if (cr_parse_i64(optarg, 0, INT64_C(1) << 40, &c->data_verify_s) != 0) {
                return flag_error("--data-verify", "want seconds >= 0 (0: hash at every use)");
            }
            break;
        case OPT_S3_REGION:
            if (!*optarg || strlen(optarg) > 64 || strchr(optarg, ':')) {
                return flag_error("--data-s3-region", "want a region name such as eu-west-1");
            }
            c->s3_region = optarg;
            break;
        case OPT_SPOT_NOTICE:
            if (!*optarg) {
                return flag_error("--spot-notice-file", "a path");
            }
            c->spot_notice = optarg;
            break;
        case OPT_LOG_MAX:
            /* bytes, or a size with its unit (64M); 0: no cap */
            if (cr_parse_i64(optarg, 0, INT64_C(1) << 50, &c->log_max_bytes) != 0 &&
                (cr_parse_bytes(optarg, &c->log_max_bytes) != 0 || c->log_max_bytes > INT64_C(1)
                                                                                          << 50)) {
                return flag_error("--log-max-bytes",
                                  "want bytes or a size such as 64M (0: no cap)");
            }
            if (c->log_max_bytes > 0 && c->log_max_bytes < 4096) {
                return flag_error("--log-max-bytes", "at least 4096 bytes (0: no cap)");
            }
            break;
        case 'C':
            c->ca_file = optarg;
            break;
        case 'T':
            c->tls_cert = optarg;
            break;
        case 'K':
            c->tls_key = optarg;
            break;
        case 'A':
            c->tls_client_ca = optarg;
            break;
        case 'm': {
            const char *why = NULL;
            cr_auth_secret_free(c->metrics_token);
            if (cr_auth_secret_file(optarg, &c->metrics_token, &why) < 0) {
                return flag_error("--metrics-token-file", why);
            }
            break;
        }
        case 'N':
            c->no_dcgm = 1;
            break;
        case 'M':
            if (!*optarg || strlen(optarg) > 1000) {
                return flag_error("--dcgm-job-map", "want a directory path (up to 1000 bytes)");
            }
            if (mkdir(optarg, 0700) != 0 && errno != EEXIST) {
                fprintf(stderr, "corral agent: --dcgm-job-map %s: %s\n", optarg, strerror(errno));
                return 2;
            }
            /* The map names every job on every GPU here: the agent's (and
             * dcgm-exporter's, which runs as root) only, never the jobs'. */
            struct stat jsb;
            if (lstat(optarg, &jsb) != 0 || !S_ISDIR(jsb.st_mode) || jsb.st_uid != geteuid()) {
                return flag_error("--dcgm-job-map", "want a directory of the agent's own user");
            }
            if ((jsb.st_mode & 077) != 0 && chmod(optarg, 0700) != 0) {
                fprintf(stderr, "corral agent: --dcgm-job-map %s: chmod: %s\n", optarg,
                        strerror(errno));
                return 2;
            }
            c->dcgm_job_map = optarg;
            break;
        case 'E': {
            const char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg || c->ntask_env >= 256) {
                return flag_error("--task-env", "want NAME=VALUE (at most 256)");
            }
            c->task_env = cr_reallocarray(c->task_env, c->ntask_env + 1, sizeof *c->task_env);
            c->task_env[c->ntask_env++] = optarg;
            break;
        }
        case 'L': {
            size_t kl = strcspn(optarg, "=");
            int ok = kl > 0 && kl < 64 && c->nlabels < 64 && strlen(optarg + kl) < 65;
            for (const char *p = optarg; ok && *p; p++) {
                ok = *p == '-' || *p == '_' || *p == '.' || (*p >= '0' && *p <= '9') ||
                     (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p == '=' && p == optarg + kl);
            }
            if (!ok) {
                return flag_error("--label", "want NAME or NAME=VALUE: letters, digits, '-', "
                                             "'_', '.', up to 63 each (at most 64 labels)");
            }
            c->labels = cr_reallocarray(c->labels, c->nlabels + 1, sizeof *c->labels);
            c->labels[c->nlabels++] = optarg;
            break;
        }
        case 'P': {
            int64_t lo, hi;
            const char *dash = strchr(optarg, '-');
            char tmp[16];
            if (!dash || (size_t)(dash - optarg) >= sizeof tmp) {
                return flag_error("--rdzv-ports", "want LO-HI, e.g. 29500-29999");
            }
            memcpy(tmp, optarg, (size_t)(dash - optarg));
            tmp[dash - optarg] = '\0';
            if (cr_parse_i64(tmp, 1024, 65535, &lo) < 0 ||
                cr_parse_i64(dash + 1, 1024, 65535, &hi) < 0 || hi < lo) {
                return flag_error("--rdzv-ports", "want LO-HI within 1024-65535, LO <= HI");
            }
            c->rdzv_lo = (int)lo;
            c->rdzv_hi = (int)hi;
            break;
        }
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        return flag_error(argv[optind], "unexpected argument");
    }
    if (!c->server ||
        (strncmp(c->server, "http://", 7) != 0 && strncmp(c->server, "https://", 8) != 0)) {
        return flag_error("--server", "required: the controller's URL (http://HOST:PORT)");
    }
    const char *env_tok = getenv("CORRAL_JOIN_TOKEN");
    if (!c->join_token && env_tok && *env_tok) {
        c->join_token = cr_strdup(env_tok);
    }
    /* Never handed down to the jobs this agent starts. */
    unsetenv("CORRAL_JOIN_TOKEN");
    if (c->join_token && !*c->join_token) {
        free(c->join_token);
        c->join_token = NULL;
    }
    if (!c->join_token && !cr__agent_cred_exists(c->state_dir)) {
        return flag_error("--join-token", "required: a file holding a bootstrap token (or "
                                          "CORRAL_JOIN_TOKEN), until STATE-DIR/node.cred exists");
    }
    if (!c->tls_cert != !c->tls_key) {
        return flag_error(c->tls_cert ? "--tls-key" : "--tls-cert",
                          "--tls-cert and --tls-key go together");
    }
    if (c->tls_client_ca && !c->tls_cert) {
        return flag_error("--tls-client-ca", "needs --tls-cert and --tls-key (mutual TLS)");
    }
    if (c->tls_client_ca && access(c->tls_client_ca, R_OK) != 0) {
        return flag_error("--tls-client-ca", "cannot read the file");
    }
    if (c->ca_file && access(c->ca_file, R_OK) != 0) {
        return flag_error("--ca-file", "cannot read the file");
    }
    if (!c->node) {
        if (gethostname(host, sizeof host) != 0) {
            snprintf(host, sizeof host, "node");
        }
        host[sizeof host - 1] = '\0';
        c->node = host;
    }
    for (const char *p = c->node; *p; p++) {
        if (!(*p == '-' || *p == '_' || *p == '.' || (*p >= '0' && *p <= '9') ||
              (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) {
            return flag_error("--node", "letters, digits, '-', '_' and '.' only");
        }
    }
    if (!*c->node || strlen(c->node) > 63) {
        return flag_error("--node", "1..63 characters");
    }
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof c->listen_host ||
        cr_parse_i64(colon + 1, 0, 65535, &v) < 0) {
        return flag_error("--listen", "want ADDR:PORT, e.g. 127.0.0.1:8621");
    }
    memcpy(c->listen_host, listen, (size_t)(colon - listen));
    c->listen_host[colon - listen] = '\0';
    c->listen_port = (int)v;
    if (!c->advertise) {
        static char route_addr[INET_ADDRSTRLEN];
        c->advertise = c->listen_host;
        if (strcmp(c->listen_host, "0.0.0.0") == 0) {
            c->advertise = local_addr_towards(c->server, route_addr, sizeof route_addr) == 0
                               ? route_addr
                               : "127.0.0.1";
        }
    }
    /* Gang peers connect to MASTER_ADDR, the rank-0 node's advertised
     * address: a loopback one is wrong everywhere but on a one-host setup. */
    if (is_loopback(c->advertise) && !server_is_loopback(c->server)) {
        fprintf(stderr,
                "corral agent: --advertise: %s is a loopback address but the controller (%s) "
                "is not on loopback: neither the controller (logs) nor a gang's other nodes "
                "(MASTER_ADDR) could reach this node. Give --advertise ADDR (this host's "
                "routable address) with --listen ADDR:PORT or --listen 0.0.0.0:PORT\n",
                c->advertise, c->server);
        return 2;
    }
    if (!c->faults) {
        *faults_owned = cr_asprintf("%s/faults", c->state_dir);
        c->faults = *faults_owned;
    }
    return 0;
}

/* --- jobs ------------------------------------------------------------ */

static cr_proc *find_proc(agent *a, int64_t job)
{
    for (size_t i = 0; i < a->nprocs; i++) {
        if (a->procs[i].job == job) {
            return &a->procs[i];
        }
    }
    return NULL;
}

static void count_exit(agent *a)
{
    pthread_mutex_lock(&a->mu);
    a->n_exited++;
    pthread_mutex_unlock(&a->mu);
}

/*
 * A MIG placement names a GPU and a profile; the agent picks a free instance
 * of that profile on it (one no other job here holds) and gives the job
 * that instance's UUID. Returns the UUID or NULL when none is free (the
 * start then fails: a MIG job never gets the whole GPU).
 */
static int mig_taken(const agent *a, const char *uuid)
{
    for (size_t i = 0; i < a->nprocs; i++) {
        const cr_proc *p = &a->procs[i];
        for (size_t k = 0; p->state != CR_PROC_EXITED && k < p->spec.uuid_count; k++) {
            if (strcmp(p->spec.gpu_uuids[k], uuid) == 0) {
                return 1;
            }
        }
    }
    return 0;
}

/* Several instances: take the controller's UUIDs when each names a free
 * instance of the profile on the GPU listed beside it. */
static int mig_all_named(const agent *a, const cr_job_spec *s)
{
    if (s->uuid_count != s->gpu_count) {
        return 0;
    }
    for (size_t i = 0; i < s->gpu_count; i++) {
        if (s->gpus[i] < 0 || (size_t)s->gpus[i] >= a->gpu->count) {
            return 0;
        }
        const cr_gpu_info *g = &a->gpu->gpus[s->gpus[i]];
        int found = 0;
        for (size_t k = 0; k < g->mig_count && !found; k++) {
            found = strcmp(g->mig[k].profile, s->mig_profile) == 0 &&
                    strcmp(g->mig[k].uuid, s->gpu_uuids[i]) == 0 && !mig_taken(a, g->mig[k].uuid);
        }
        for (size_t q = 0; q < i && found; q++) {
            found = strcmp(s->gpu_uuids[q], s->gpu_uuids[i]) != 0;
        }
        if (!found) {
            return 0;
        }
    }
    return 1;
}

static const char *pick_mig(agent *a, const cr_job_spec *s)
{
    if (s->gpu_count != 1 || s->gpus[0] < 0 || (size_t)s->gpus[0] >= a->gpu->count) {
        return NULL;
    }
    const cr_gpu_info *g = &a->gpu->gpus[s->gpus[0]];
    /* The controller's choice when it names a free instance of the profile;
     * else the first free one (the agent knows best what is in use here). */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < g->mig_count; k++) {
            const cr_mig_inst *m = &g->mig[k];
            if (strcmp(m->profile, s->mig_profile) != 0 || mig_taken(a, m->uuid)) {
                continue;
            }
            if (pass == 1 || (s->uuid_count == 1 && strcmp(s->gpu_uuids[0], m->uuid) == 0)) {
                return m->uuid;
            }
        }
    }
    return NULL;
}

/* Whether TCP port (0: any) can be bound here now; returns the port bound,
 * or 0. SO_REUSEADDR as servers set it, so a port in TIME_WAIT counts free. */
static int probe_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1, got = 0;
    if (fd < 0) {
        return 0;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof sa;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0) {
        got = ntohs(sa.sin_port);
    }
    close(fd);
    return got;
}

/* For a job that asks for a port: the preferred one (the controller's PORT)
 * when it is free here, else one the kernel picks. Returned new: the spec
 * with PORT and port set; NULL when the job asks for none (or one was given,
 * on an adopted run). */
static cr_job_spec *assign_port(const cr_job_spec *want)
{
    if (!want->assign_port || want->port > 0) {
        return NULL;
    }
    int64_t pref = 0;
    for (size_t i = 0; i < want->envc; i++) {
        if (strncmp(want->env[i], "PORT=", 5) == 0 &&
            cr_parse_i64(want->env[i] + 5, 1, 65535, &pref) != 0) {
            pref = 0;
        }
    }
    int port = pref > 0 ? probe_port((int)pref) : 0;
    port = port ? port : probe_port(0);
    if (!port) {
        return NULL; /* the preferred PORT stands; the start reports what fails */
    }
    json_t *j = cr_job_spec_to_json(want);
    json_t *env = json_object_get(j, "env");
    char v[16];
    snprintf(v, sizeof v, "%d", port);
    json_object_set_new(env, "PORT", json_string(v));
    json_object_set_new(j, "port", json_integer(port));
    cr_job_spec *s = cr_calloc(1, sizeof *s);
    char err[256];
    if (cr_job_spec_from_json(j, "", s, err, sizeof err) < 0) {
        free(s);
        s = NULL;
    } else {
        cr_job_spec_copy_secrets(s, want); /* to_json leaves them out */
    }
    json_decref(j);
    if (s && port != pref) {
        cr_info("agent: job=%lld: PORT %lld is taken here; using %d", (long long)s->job,
                (long long)pref, port);
    }
    return s;
}

/* Whether a rendezvous port is held by a job running here. */
static int rdzv_taken(const agent *a, int port)
{
    for (size_t i = 0; i < a->nprocs; i++) {
        const cr_proc *p = &a->procs[i];
        if (p->state != CR_PROC_EXITED &&
            (p->spec.port == port || (p->spec.has_gang && p->spec.gang.master_port == port))) {
            return 1;
        }
    }
    return 0;
}

/*
 * What the node adds to a job before it starts: the rendezvous port when
 * this node holds rank 0 of a gang the controller has no port for yet (a
 * free one from --rdzv-ports, not held by another job here: reported to
 * the controller as the job's "port", which passes it to the other
 * nodes), and the --task-env settings the job does not set itself.
 * Returned new, or NULL when nothing is added.
 */
static cr_job_spec *node_additions(const agent *a, const cr_job_spec *want)
{
    int port = 0;
    if (want->has_gang && want->gang.node_rank == 0 && want->gang.master_port == 0) {
        int span = a->cfg.rdzv_hi - a->cfg.rdzv_lo + 1;
        for (int k = 0; k < span && !port; k++) {
            int cand = a->cfg.rdzv_lo + (int)((want->job + k) % span);
            if (!rdzv_taken(a, cand) && probe_port(cand) == cand) {
                port = cand;
            }
        }
        if (!port) {
            cr_error("agent: job=%lld: no free rendezvous port in %d-%d", (long long)want->job,
                     a->cfg.rdzv_lo, a->cfg.rdzv_hi);
        }
    }
    if (!port && a->cfg.ntask_env == 0) {
        return NULL;
    }
    json_t *j = cr_job_spec_to_json(want);
    if (port) {
        json_object_set_new(json_object_get(j, "gang"), "master_port", json_integer(port));
        json_object_set_new(j, "port", json_integer(port));
    }
    json_t *env = json_object_get(j, "env");
    for (size_t i = 0; i < a->cfg.ntask_env; i++) {
        const char *kv = a->cfg.task_env[i], *eq = strchr(kv, '=');
        char *k = cr_strndup(kv, (size_t)(eq - kv));
        if (!json_object_get(env, k)) {
            json_object_set_new(env, k, json_string(eq + 1));
        }
        free(k);
    }
    cr_job_spec *s = cr_calloc(1, sizeof *s);
    char err[256];
    if (cr_job_spec_from_json(j, "", s, err, sizeof err) < 0) {
        CR_FREE(s);
    } else {
        cr_job_spec_copy_secrets(s, want); /* to_json leaves them out */
    }
    json_decref(j);
    return s;
}

static void start_job(agent *a, const cr_job_spec *given, char **data_env)
{
    cr_job_spec *added = node_additions(a, given);
    cr_job_spec *ported = assign_port(added ? added : given);
    const cr_job_spec *want = ported ? ported : added ? added : given;
    CR_GROW(a->procs, a->nprocs, a->procs_cap);
    cr_proc *p = &a->procs[a->nprocs];
    char err[512];
    cr_job_spec mig_spec;
    cr_job_spec *ctr_spec = NULL; /* podman's spec for a job with an image */
    const cr_job_spec *s = want;
    char *mig_uuid[1] = {NULL};
    if (want->mig_profile && want->gpu_count > 1) {
        if (!mig_all_named(a, want)) {
            cr_error("agent: job=%lld not started: the MIG %s instances named are not all free "
                     "here",
                     (long long)want->job, want->mig_profile);
            cr_proc_init(p);
            p->job = want->job;
            p->state = CR_PROC_EXITED;
            p->exit_code = 126;
            count_exit(a);
            goto done;
        }
    } else if (want->mig_profile) {
        const char *u = pick_mig(a, want);
        if (!u) {
            /* Never the whole GPU: that would break the isolation the job
             * asked for. Fail the start; the controller sees the exit. */
            cr_error("agent: job=%lld not started: no free MIG %s instance on GPU %d",
                     (long long)want->job, want->mig_profile, want->gpu_count ? want->gpus[0] : -1);
            cr_proc_init(p);
            p->job = want->job;
            p->state = CR_PROC_EXITED;
            p->exit_code = 126;
            count_exit(a);
            goto done;
        }
        mig_spec = *want;
        mig_uuid[0] = (char *)u;
        mig_spec.gpu_uuids = mig_uuid;
        mig_spec.uuid_count = 1;
        s = &mig_spec;
    }
    /* A fractional task: an MPS client of its GPU's daemon, or time-sliced. */
    cr_job_spec share_spec;
    char mps_pipe[700], sharing[300] = "";
    if ((s->gpu_milli || s->gpu_mem_bytes) &&
        cr__agent_mps_job(a, s, mps_pipe, sizeof mps_pipe, sharing, sizeof sharing)) {
        share_spec = *s;
        share_spec.mps_pipe = mps_pipe;
        s = &share_spec;
    }
    char how[300] = "", why[400] = "";
    int64_t pull_ms = 0;
    int fatal = 0;
    cr_job_spec data_spec = *s; /* shallow: its data's variables, in a container too */
    data_spec.data_env = data_env;
    s = &data_spec;
    if (s->ctr.image && !s->ctr.podman) {
        /* Before the job counts as started: its image, its mounts. */
        int crc = cr__agent_ctr_prepare(a, s, &ctr_spec, how, sizeof how, &pull_ms, why, sizeof why,
                                        &fatal);
        if (crc < 0) {
            cr_error("agent: job=%lld not started: %s", (long long)s->job, why);
            cr_proc_init(p);
            p->job = s->job;
            p->spec.run = s->run;
            p->state = CR_PROC_EXITED;
            p->exit_code = 125;
            p->fatal = fatal;
            snprintf(p->reason, sizeof p->reason, "%s", why);
            count_exit(a);
            goto done;
        }
        s = ctr_spec;
    }
    cr_job_spec cap_spec = *s; /* a shallow copy: the agent's log cap for the shim */
    cap_spec.log_max_bytes = a->cfg.log_max_bytes;
    cap_spec.data_env = data_env;
    cap_spec.step_server = a->cfg.server;
    s = &cap_spec;
    if (cr_proc_spawn_iso(a->cfg.state_dir, a->cfg.node, s, &a->iso, p, err, sizeof err) < 0) {
        cr_error("agent: job=%lld not started: %s", (long long)s->job, err);
        cr_proc_init(p);
        p->job = s->job;
        p->state = CR_PROC_EXITED;
        p->exit_code = 126;
        count_exit(a);
        if (ctr_spec) {
            cr__agent_ctr_ended(a, ctr_spec);
        }
    } else {
        if (ctr_spec) {
            snprintf(p->pull, sizeof p->pull, "%s", how);
            p->pull_ms = pull_ms;
            cr_info("agent: job=%lld container %s from %s (image %s, %lld ms)", (long long)s->job,
                    s->argv[0], s->ctr.image, how, (long long)pull_ms);
        }
        cr_debug("agent: job=%lld started pid=%d gpus=%zu", (long long)s->job, (int)p->pid,
                 s->gpu_count);
        if (s->gpu_milli || s->gpu_mem_bytes) {
            snprintf(p->sharing, sizeof p->sharing, "%s", sharing);
            cr_info("agent: job=%lld shares GPU %d (%lld/1000, %lld bytes): %s", (long long)s->job,
                    s->gpu_count ? s->gpus[0] : -1, (long long)s->gpu_milli,
                    (long long)s->gpu_mem_bytes, sharing);
        }
    }
done:
    a->nprocs++;
    pthread_mutex_lock(&a->mu);
    a->n_started++;
    pthread_mutex_unlock(&a->mu);
    if (ported) {
        cr_job_spec_fini(ported);
        free(ported);
    }
    if (added) {
        cr_job_spec_fini(added);
        free(added);
    }
    if (ctr_spec) {
        cr_job_spec_fini(ctr_spec);
        free(ctr_spec);
    }
}

/* Whether desired entry s, for a job whose run p has exited here, is a new
 * run. The controller numbers each start of a job ("run"): a different
 * number is a retry, the same one is the run that ended (its end not yet
 * taken in). Only without numbers does the version tell: listed again after
 * the controller took in the end. A version moves for any change on the node,
 * so it alone would restart a job whose end the controller has not applied
 * to the run it shows. */
static int placed_again(const agent *a, const cr_job_spec *s, const cr_proc *p)
{
    if (s->run > 0 && p->spec.run > 0) {
        return s->run != p->spec.run;
    }
    return p->exit_acked > 0 && a->desired.version > p->exit_acked;
}

/* The GPUs' power cap the controller asks (its pool's power budget):
 * applied once per value; a backend or board that refuses is logged. */
static void power_cap_apply(agent *a)
{
    int64_t want = a->desired.power_cap_w;
    if (want == a->power_cap_req || (a->power_cap_req < 0 && want == 0)) {
        return;
    }
    a->power_cap_req = want;
    for (size_t i = 0; i < a->gpu->count; i++) {
        char err[256] = "";
        int applied = 0;
        int rc = cr_gpu_set_power_cap(a->gpu, i, (int)want, &applied, err, sizeof err);
        if (rc < 0) {
            cr_error("agent: GPU %d: power cap %lld W not applied: %s", a->gpu->gpus[i].index,
                     (long long)want, err);
            continue;
        }
        a->power_cap_w[i] = want > 0 ? applied : 0;
        cr_info("agent: GPU %d: power limit %d W (%s)", a->gpu->gpus[i].index, applied,
                want > 0 ? "its pool's power budget" : "the board's default");
    }
}

/* Apply the desired state; returns 1 when something changed. */
static int reconcile(agent *a, int64_t now_ns)
{
    int changed = cr__agent_mig_apply(a); /* before the jobs that need the new instances */
    power_cap_apply(a);
    for (size_t i = 0; i < a->desired.count; i++) {
        const cr_job_spec *s = &a->desired.jobs[i];
        cr_proc *p = find_proc(a, s->job);
        if (s->action == CR_ACT_RUN && p && p->state == CR_PROC_EXITED && placed_again(a, s, p)) {
            /* A retry placed here again. The old run is done with. */
            cr_info("agent: job=%lld placed here again (retry): run it anew", (long long)s->job);
            cr_proc_forget_iso(a->cfg.state_dir, &a->iso, p);
            cr_proc_fini(p);
            *p = a->procs[--a->nprocs];
            p = NULL;
        }
        if (s->action == CR_ACT_RUN && !p && s->has_gang && s->gang.node_rank > 0 &&
            s->gang.master_port == 0) {
            /* Rank 0's node has not reserved the rendezvous port yet. */
            continue;
        }
        if (s->action == CR_ACT_RUN && !p && a->unfit[0]) {
            /* require_isolation not met: no job runs here (the controller
             * drained the node; this is a placement that came anyway). */
            cr_error("agent: job=%lld not started: this node takes no jobs (%s)", (long long)s->job,
                     a->unfit);
            CR_GROW(a->procs, a->nprocs, a->procs_cap);
            cr_proc *np = &a->procs[a->nprocs++];
            cr_proc_init(np);
            np->job = s->job;
            np->spec.job = s->job;
            np->spec.run = s->run;
            np->state = CR_PROC_EXITED;
            np->exit_code = 126;
            snprintf(np->reason, sizeof np->reason, "node takes no jobs: require_isolation: %.300s",
                     a->unfit);
            count_exit(a);
            changed = 1;
            continue;
        }
        if (s->action == CR_ACT_RUN && !p) {
            /* Its data first (agent_data.c): staged, the job waits. */
            char **denv = NULL, dwhy[400];
            size_t was = a->nstaging;
            int st = cr__agent_data_stage(a, s, &denv, dwhy, sizeof dwhy);
            if (st == 0) {
                changed |= a->nstaging != was; /* its reason says so at once */
                continue;
            }
            if (st < 0) {
                cr_error("agent: job=%lld not started: %s", (long long)s->job, dwhy);
                CR_GROW(a->procs, a->nprocs, a->procs_cap);
                cr_proc *np = &a->procs[a->nprocs++];
                cr_proc_init(np);
                np->job = s->job;
                np->spec.job = s->job;
                np->spec.run = s->run;
                np->state = CR_PROC_EXITED;
                np->exit_code = 125;
                np->fatal = 1; /* fetched again it would fail again: no retry */
                snprintf(np->reason, sizeof np->reason, "%s", dwhy);
                count_exit(a);
                changed = 1;
                continue;
            }
            if (s->checkpoint_dir && (s->run > 1 || s->resume)) {
                /* a requeued or resumed run: where it left off */
                char *latest = cr__agent_ckpt_latest(s->checkpoint_dir);
                if (latest) {
                    size_t nd = 0;
                    while (denv && denv[nd]) {
                        nd++;
                    }
                    denv = cr_realloc(denv, (nd + 2) * sizeof *denv);
                    denv[nd] = latest;
                    denv[nd + 1] = NULL;
                }
            }
            /* a container sees its data at its mount points */
            cr_job_spec *mounted = cr__agent_data_mounts(s, denv);
            /* Not a change to report: the controller asked for it. A start
             * that failed is reported (as an exit) at once. */
            start_job(a, mounted ? mounted : s, denv);
            cr_strv_free(denv);
            if (mounted) {
                cr_job_spec_fini(mounted);
                free(mounted);
            }
            /* A port it was given is reported at once: the gateways wait for it. */
            const cr_job_spec *sp = &a->procs[a->nprocs - 1].spec;
            changed |= a->procs[a->nprocs - 1].state == CR_PROC_EXITED ||
                       (sp->port > 0 && (sp->assign_port || sp->gang.nnodes > 1));
        } else if (s->action == CR_ACT_RUN && p && p->state == CR_PROC_RUNNING &&
                   s->signal_at > p->signal_done) {
            /* scancel --signal / sbatch --signal: to the job's process group
             * (its shim ignores the signals a job may be sent) */
            int sig = cr_task_signal(s->signal_name);
            p->signal_done = s->signal_at;
            if (sig > 0 && p->pid > 0) {
                cr_info("agent: job=%lld SIG%s", (long long)s->job, s->signal_name);
                kill(-p->pid, sig);
            }
        } else if (s->action == CR_ACT_STOP && p && p->state == CR_PROC_RUNNING) {
            /* the suspend contract (docs/api.md): a job that checkpoints is
             * stopped with its checkpoint signal, then grace (a requeue, a
             * spot reclaim, a cancel alike) */
            int cks = s->ckpt_signal[0] ? cr_task_signal(s->ckpt_signal) : 0;
            cr_info("agent: job=%lld stop%s%s (grace %llds)", (long long)s->job,
                    cks > 0 ? " with SIG" : "", cks > 0 ? s->ckpt_signal : "",
                    (long long)(s->grace_ns / CR_NS_PER_SEC));
            cr_proc_stop_sig(p, cks > 0 ? cks : SIGTERM, s->grace_ns, now_ns);
            cr__agent_ctr_stop(a, p, s->grace_ns);
            changed = 1;
        } else if (s->action == CR_ACT_STOP && !p && s->run > 0) {
            /* Stopped before it ever started here (a cancel right after the
             * placement reached us with the same document): say it ended,
             * or the controller would wait for an exit that never comes. */
            cr_info("agent: job=%lld stopped before it started", (long long)s->job);
            CR_GROW(a->procs, a->nprocs, a->procs_cap);
            cr_proc *np = &a->procs[a->nprocs++];
            cr_proc_init(np);
            np->job = s->job;
            np->spec.job = s->job;
            np->spec.run = s->run;
            np->state = CR_PROC_EXITED;
            np->signal = SIGTERM;
            np->exit_code = 128 + SIGTERM;
            count_exit(a);
            changed = 1;
        }
    }
    for (size_t i = 0; i < a->nprocs; i++) {
        cr_proc *p = &a->procs[i];
        if (p->state == CR_PROC_RUNNING && !cr_desired_find(&a->desired, p->job)) {
            /* the suspend contract: a job that checkpoints gets its
             * checkpoint signal, then grace_ns to write it and exit */
            const char *why = cr_desired_stop_reason(&a->desired, p->job);
            int cks = p->spec.ckpt_signal[0] ? cr_task_signal(p->spec.ckpt_signal) : 0;
            cr_info("agent: job=%lld no longer wanted here (%.500s): stop%s%s", (long long)p->job,
                    why ? why : "the controller gave no reason", cks > 0 ? " with SIG" : "",
                    cks > 0 ? p->spec.ckpt_signal : "");
            cr_proc_stop_sig(p, cks > 0 ? cks : SIGTERM, p->spec.grace_ns, now_ns);
            cr__agent_ctr_stop(a, p, p->spec.grace_ns);
            changed = 1;
        }
    }
    return changed;
}

/* Publish the running jobs' ids for the HTTP threads (log follows). */
static void publish_live(agent *a)
{
    pthread_mutex_lock(&a->mu);
    a->nlive = 0;
    a->nstep_creds = 0;
    for (size_t i = 0; i < a->nprocs; i++) {
        if (a->procs[i].state != CR_PROC_EXITED) {
            CR_GROW(a->live, a->nlive, a->live_cap);
            a->live[a->nlive++] = a->procs[i].job;
            /* the credential is the desired state's (never journaled) */
            const cr_job_spec *s = cr_desired_find(&a->desired, a->procs[i].job);
            if (s && s->batch && s->step_token[0] && s->run == a->procs[i].spec.run) {
                CR_GROW(a->step_creds, a->nstep_creds, a->step_creds_cap);
                struct agent_step_cred *sc = &a->step_creds[a->nstep_creds++];
                sc->job = s->job;
                sc->uid = s->has_user ? s->uid : (int64_t)geteuid();
                memcpy(sc->token, s->step_token, sizeof sc->token);
            }
        }
    }
    pthread_mutex_unlock(&a->mu);
}

/* Drop exits the controller has seen (it no longer lists the job). */
static void forget_reported(agent *a)
{
    if (!a->have_desired) {
        return;
    }
    size_t w = 0;
    for (size_t i = 0; i < a->nprocs; i++) {
        cr_proc *p = &a->procs[i];
        if (p->state == CR_PROC_EXITED && !cr_desired_find(&a->desired, p->job)) {
            cr_proc_forget_iso(a->cfg.state_dir, &a->iso, p);
            cr_proc_fini(p);
            continue;
        }
        a->procs[w++] = *p;
    }
    if (w != a->nprocs) {
        a->nprocs = w;
        cr_proc_journal_compact(a->cfg.state_dir, a->procs, a->nprocs, 0);
    }
}

/* Whether the shim of p capped its logs or could not write them (the
 * disk full) since the last look: said once each, here and in the status
 * (the controller's events). Returns 1 when something is new. */
static int check_logs(agent *a, cr_proc *p)
{
    if (p->adopted || (p->out_capped && p->out_nospace)) {
        return 0; /* an adopted job's shim may be an older agent's, with no marks */
    }
    int capped = 0, nospace = 0, news = 0;
    cr_proc_log_marks(a->cfg.state_dir, p->job, &capped, &nospace);
    if (capped && !p->out_capped) {
        p->out_capped = a->cfg.log_max_bytes;
        cr_warn("agent: job=%lld output capped at %lld bytes (--log-max-bytes): the rest of it "
                "is dropped",
                (long long)p->job, (long long)p->out_capped);
        news = 1;
    }
    if (nospace && !p->out_nospace) {
        p->out_nospace = 1;
        cr_error("agent: job=%lld output lost: a write to its log in %s/logs/%lld failed (no "
                 "space left on device?)",
                 (long long)p->job, a->cfg.state_dir, (long long)p->job);
        news = 1;
    }
    return news;
}

/* The job's measured throughput (docs/model.md "Learning from the
 * cluster"): the corral-metric lines of the tail of its stdout log (the
 * last METRIC_TAIL bytes; the last good value wins). Bad lines are
 * counted and logged once, never fatal. */
#define METRIC_TAIL (1024 * 1024)

static void read_metrics(agent *a, cr_proc *p)
{
    char *path = cr_proc_log_path(a->cfg.state_dir, p->job, "out");
    FILE *f = fopen(path, "rb");
    free(path);
    if (!f) {
        return;
    }
    char *buf = cr_malloc(METRIC_TAIL);
    size_t n = 0;
    if (fseeko(f, 0, SEEK_END) == 0) {
        off_t size = ftello(f);
        off_t from = size > METRIC_TAIL ? size - METRIC_TAIL : 0;
        if (fseeko(f, from, SEEK_SET) == 0) {
            n = fread(buf, 1, METRIC_TAIL, f);
        }
    }
    fclose(f);
    cr_metric m;
    cr_metric_scan(buf, n, &m);
    free(buf);
    p->metric_tokens_per_s = m.tokens_per_s;
    p->metric_step_time_s = m.step_time_s;
    p->metric_bad = m.bad;
    if (m.bad) {
        cr_warn("agent: job=%lld: %d corral-metric line%s did not parse (ignored; the format is "
                "'corral-metric tokens_per_s=N step_time_s=S')",
                (long long)p->job, m.bad, m.bad > 1 ? "s" : "");
    }
}

static int reap(agent *a)
{
    int any = 0, st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        for (size_t i = 0; i < a->nprocs; i++) {
            cr_proc *p = &a->procs[i];
            if (p->pid == pid && !p->adopted && p->state != CR_PROC_EXITED) {
                check_logs(a, p); /* in the report of its end */
                read_metrics(a, p);
                cr_proc_reaped(p, a->cfg.state_dir, st);
                cr__agent_ctr_ended(a, &p->spec);
                cr_debug("agent: job=%lld exited code=%d signal=%d", (long long)p->job,
                         p->exit_code, p->signal);
                count_exit(a);
                any = 1;
            }
        }
    }
    return any;
}

/* --- GPUs ------------------------------------------------------------ */

static int sample_gpus(agent *a, int64_t now_ns)
{
    cr_gpu_load load;
    for (size_t i = 0; i < CR_GPU_MAX; i++) {
        load.busy[i] = -1;
    }
    for (size_t i = 0; i < a->nprocs; i++) {
        const cr_proc *p = &a->procs[i];
        if (p->state == CR_PROC_EXITED) {
            continue;
        }
        for (size_t k = 0; k < p->spec.gpu_count; k++) {
            int g = p->spec.gpus[k];
            if (g >= 0 && (size_t)g < a->gpu->count) {
                /* A job's CPU share spread over its GPUs: one busy core
                 * drives one GPU to 100 %. */
                double share = p->busy;
                load.busy[g] = (load.busy[g] < 0 ? 0 : load.busy[g]) + share;
            }
        }
    }
    a->gpu->ops->sample(a->gpu, &load, now_ns, a->samples);
    int changed = 0;
    for (size_t i = 0; i < a->gpu->count; i++) {
        int before = a->health[i].state;
        if (cr_gpu_health_update(&a->health[i], &a->samples[i], &a->cfg.health, now_ns)) {
            changed = 1;
            if (a->health[i].state != CR_GPU_OK) {
                cr_warn("agent: gpu=%zu leaves the pool: %s", i, a->health[i].reason);
            } else if (before != CR_GPU_OK) {
                cr_info("agent: gpu=%zu healthy again", i);
            }
        }
    }
    return changed;
}

static void render_metrics(agent *a)
{
    cr_buf b;
    cr_buf_init(&b);
    cr__agent_metrics_render(a, &b);
    cr__agent_job_map(a);
    char *t = cr_buf_take(&b);
    pthread_mutex_lock(&a->mu);
    free(a->metrics_text);
    a->metrics_text = t;
    pthread_mutex_unlock(&a->mu);
    cr_buf_fini(&b);
}

/*
 * Where the GPU device nodes are. The sim backend gets placeholders made
 * with mknod (major 195, minor = index, as NVIDIA's driver numbers them):
 * opening one fails with ENXIO (no driver) when the job's device filter
 * allows it and EPERM when it does not, which is what the tests and the
 * demo show. Not being able to make them only loses that demonstration.
 */
/* <state>/instance.id: 16 hex digits made once, kept across restarts. It
 * names this agent's cgroup directories (corral-<node>-<id>) and labels its
 * containers, so two agents on one host (two clusters, or test suites with
 * the same node name) never kill or sweep each other's jobs; a restarted
 * agent finds its own again. 0, or -1 with errno. */
static int load_instance_id(const char *dir, char out[17])
{
    char *path = cr_asprintf("%s/instance.id", dir);
    int rc = -1;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, out, 16);
        close(fd);
        out[n == 16 ? 16 : 0] = '\0';
        if (n == 16 && strspn(out, "0123456789abcdef") == 16) {
            rc = 0;
            goto out;
        }
    }
    unsigned char r[8];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        goto out;
    }
    for (size_t i = 0; i < sizeof r; i++) {
        snprintf(out + 2 * i, 3, "%02x", r[i]);
    }
    char *tmp = cr_asprintf("%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
        int ok = write(fd, out, 16) == 16 && fsync(fd) == 0;
        close(fd);
        rc = ok && rename(tmp, path) == 0 ? 0 : -1;
    }
    free(tmp);
out:
    free(path);
    return rc;
}

static void setup_devices(agent *a, char **dir_owned)
{
    int sim = strcmp(a->gpu->ops->name, "sim") == 0;
    *dir_owned = a->cfg.dev_dir ? cr_strdup(a->cfg.dev_dir)
                 : sim          ? cr_asprintf("%s.dev", a->cfg.state_dir)
                                : cr_strdup("/dev");
    if (!sim) {
        return;
    }
    char err[512];
    mode_t old = umask(022);
    if (cr_iso_sim_devices(*dir_owned, a->gpu->count, err, sizeof err) < 0) {
        cr_warn("agent: no placeholder GPU device nodes for the sim GPUs: %s", err);
    } else {
        cr_info("agent: sim GPU device nodes in %s (nvidia0..%zu, nvidiactl)", *dir_owned,
                a->gpu->count ? a->gpu->count - 1 : 0);
    }
    umask(old);
}

/* Remove checkpoint directories (<base>/<tenant>/<job>) untouched for
 * longer than the retention, except those of jobs this agent runs. */
static void sweep_checkpoints(agent *a, int64_t now_ns)
{
    const char *base = a->desired.checkpoint_base;
    int64_t keep_s = a->desired.checkpoint_retention_s;
    if (!base || keep_s <= 0) {
        return;
    }
    DIR *d = opendir(base);
    struct dirent *t;
    while (d && (t = readdir(d)) != NULL) {
        if (t->d_name[0] == '.') {
            continue;
        }
        char *tdir = cr_asprintf("%s/%s", base, t->d_name);
        DIR *jd = opendir(tdir);
        struct dirent *e;
        while (jd && (e = readdir(jd)) != NULL) {
            int64_t id;
            if (cr_parse_i64(e->d_name, 1, INT64_MAX, &id) != 0 || find_proc(a, id)) {
                continue;
            }
            char *jdir = cr_asprintf("%s/%s", tdir, e->d_name);
            struct stat sb;
            if (lstat(jdir, &sb) == 0 && S_ISDIR(sb.st_mode) &&
                now_ns / CR_NS_PER_SEC - (int64_t)sb.st_mtime > keep_s) {
                cr_info("agent: checkpoint %s older than the retention (%llds): removed", jdir,
                        (long long)keep_s);
                cr_rm_rf(jdir);
            }
            free(jdir);
        }
        if (jd) {
            closedir(jd);
        }
        free(tdir);
    }
    if (d) {
        closedir(d);
    }
}

/* --- the loop -------------------------------------------------------- */

static int take_pending(agent *a)
{
    pthread_mutex_lock(&a->mu);
    cr_desired *d = a->pending;
    a->pending = NULL;
    pthread_mutex_unlock(&a->mu);
    if (!d) {
        return 0;
    }
    cr_desired_fini(&a->desired);
    a->desired = *d;
    free(d);
    a->have_desired = 1;
    return 1;
}

static void stop_all_and_wait(agent *a, int sfd)
{
    int64_t now = cr_mono_ns();
    for (size_t i = 0; i < a->nprocs; i++) {
        cr_proc_stop(&a->procs[i],
                     a->procs[i].spec.grace_ns > 10 * CR_NS_PER_SEC ? 10 * CR_NS_PER_SEC
                                                                    : a->procs[i].spec.grace_ns,
                     now);
    }
    int64_t end = cr_mono_ns() + 15 * CR_NS_PER_SEC;
    for (;;) {
        reap(a);
        size_t left = 0;
        now = cr_mono_ns();
        for (size_t i = 0; i < a->nprocs; i++) {
            if (cr_proc_tick(&a->procs[i], a->cfg.state_dir, now, now)) {
                cr__agent_ctr_ended(a, &a->procs[i].spec);
            }
            left += a->procs[i].state != CR_PROC_EXITED;
        }
        if (left == 0 || cr_mono_ns() > end) {
            break;
        }
        struct pollfd pf = {sfd, POLLIN, 0};
        if (poll(&pf, 1, 100) > 0) {
            struct signalfd_siginfo si;
            ssize_t r = read(sfd, &si, sizeof si);
            (void)r;
        }
    }
    if (a->registered) {
        int64_t acked;
        cr__agent_post_status(a, &acked); /* tell the controller how they ended */
    }
    /* The ended jobs' cgroups go too (every hierarchy: v1 memory, cpu,
     * pids, devices, and v2); one still running keeps its own (rmdir
     * fails), and the node's directories then stay with it. */
    for (size_t i = 0; i < a->nprocs; i++) {
        if (a->procs[i].state == CR_PROC_EXITED) {
            cr_iso_job_remove(&a->procs[i].iso);
        }
    }
}

/* --spot-notice-file: the file appeared (the provider's reclaim notice, a
 * cloud's metadata watcher writes it): the seconds left in it (1..3600,
 * default 30) go to the controller with the next status, once. Returns 1
 * when the notice is new. */
static int spot_notice(agent *a)
{
    if (!a->cfg.spot_notice || a->reclaim_in_s > 0) {
        return 0;
    }
    FILE *f = fopen(a->cfg.spot_notice, "r");
    if (!f) {
        return 0;
    }
    long long s = 0;
    if (fscanf(f, "%lld", &s) != 1 || s < 1 || s > 3600) {
        s = 30;
    }
    fclose(f);
    a->reclaim_in_s = s;
    cr_warn("agent: spot reclaim notice (%s): this node goes in %llds; telling the controller",
            a->cfg.spot_notice, s);
    return 1;
}

/* The next wait before a register or status is tried again: doubled, at
 * most 5 s and at most a third of the node lease, so that a controller
 * that answers (if only to refuse: 507 with its disk full, 409) is asked
 * again, and renews the lease, before the lease can run out. */
static int64_t retry_backoff(const agent *a, int64_t was)
{
    int64_t cap = 5 * CR_NS_PER_SEC;
    if (a->lease_ns > 0 && a->lease_ns / 3 < cap) {
        cap = a->lease_ns / 3;
    }
    cap = cap < 100 * CR_NS_PER_MS ? 100 * CR_NS_PER_MS : cap;
    return was * 2 > cap ? cap : was * 2;
}

static int run(agent *a, int sfd)
{
    int64_t next_sample = 0, next_status = 0, retry_at = 0, status_backoff = 100 * CR_NS_PER_MS;
    int64_t next_register = 0, register_backoff = 100 * CR_NS_PER_MS;
    int64_t end_mono = a->cfg.run_for_ns ? cr_mono_ns() + a->cfg.run_for_ns : 0;
    int dirty = 1;
    while (!atomic_load(&a->stop)) {
        /* Every timer here is monotonic: a wall-clock step must neither
         * cut a job's stop grace short nor delay its SIGKILL. */
        int64_t mono = cr_mono_ns();
        if (end_mono && mono >= end_mono) {
            cr_info("agent: --run-for elapsed");
            break;
        }
        /* Signals and wake-ups. */
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
            if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
                cr_info("agent: signal %u: stopping", si.ssi_signo);
                atomic_store(&a->stop, 1);
            } else if (si.ssi_signo == SIGUSR1) {
                next_sample = 0; /* re-read the fault file now */
            }
        }
        if (atomic_load(&a->stop)) {
            break;
        }
        char drain[64];
        while (read(a->wake_rd, drain, sizeof drain) > 0) {
        }
        dirty |= reap(a);
        /* Past the lease no new document is applied (it waits in pending):
         * a controller heard from renews the lease first. */
        if (!a->lease_expired && take_pending(a)) {
            atomic_store(&a->data_woke, 0);
            dirty |= reconcile(a, mono);
            publish_live(a);
        } else if (!a->lease_expired && a->have_desired && atomic_exchange(&a->data_woke, 0)) {
            /* a staged job's data is here (or failed): start it */
            dirty |= reconcile(a, mono);
            publish_live(a);
        }
        cr__agent_data_sweep(a);
        cr__agent_mps_sweep(a);
        if (mono >= next_sample) {
            for (size_t i = 0; i < a->nprocs; i++) {
                if (a->procs[i].state != CR_PROC_EXITED) {
                    dirty |= check_logs(a, &a->procs[i]);
                }
                if (cr_proc_tick(&a->procs[i], a->cfg.state_dir, mono, mono)) {
                    cr__agent_ctr_ended(a, &a->procs[i].spec);
                    count_exit(a);
                    dirty = 1;
                }
            }
            cr__agent_ctr_sweep(a, mono);
            if (a->nstaging > 0 && a->have_desired && !a->lease_expired) {
                /* the staging jobs' progress, for their reason (once a second) */
                a->staging_moved = 0;
                dirty |= reconcile(a, mono);
                dirty |= a->staging_moved;
            }
            dirty |= spot_notice(a);
            dirty |= sample_gpus(a, mono);
            render_metrics(a);
            next_sample = mono + CR_NS_PER_SEC;
            if (mono >= a->next_sweep_ns && a->have_desired) {
                sweep_checkpoints(a, cr_now_ns()); /* compared with file mtimes: wall */
                a->next_sweep_ns = mono + 600 * CR_NS_PER_SEC;
            }
        } else {
            for (size_t i = 0; i < a->nprocs; i++) {
                if (a->procs[i].state == CR_PROC_STOPPING &&
                    cr_proc_tick(&a->procs[i], a->cfg.state_dir, mono, mono)) {
                    cr__agent_ctr_ended(a, &a->procs[i].spec); /* an adopted job's end */
                    dirty = 1;
                }
            }
        }
        pthread_mutex_lock(&a->mu);
        int registered = a->registered;
        pthread_mutex_unlock(&a->mu);
        if (!registered && mono >= next_register) {
            if (cr__agent_register(a) == 0) {
                register_backoff = 100 * CR_NS_PER_MS;
                dirty = 1;
                registered = 1;
            } else {
                next_register = mono + register_backoff;
                register_backoff = retry_backoff(a, register_backoff);
            }
        }
        if (registered && mono >= retry_at && (dirty || mono >= next_status)) {
            int64_t acked = 0;
            if (cr__agent_post_status(a, &acked) == 0) {
                dirty = 0;
                for (size_t i = 0; i < a->nprocs && acked > 0; i++) {
                    if (a->procs[i].state == CR_PROC_EXITED && a->procs[i].exit_acked == 0) {
                        a->procs[i].exit_acked = acked;
                    }
                }
                status_backoff = 100 * CR_NS_PER_MS;
                retry_at = 0;
                next_status = cr_mono_ns() + a->heartbeat_ns;
                forget_reported(a);
            } else {
                retry_at = cr_mono_ns() + status_backoff;
                status_backoff = retry_backoff(a, status_backoff);
            }
        }
        /* A job that ended on its own while the call above waited for its
         * answer is reaped before the lease is looked at: else a lease
         * running out now would count it as stopped by the lease (and the
         * controller requeue a job that had completed). */
        dirty |= reap(a);
        int64_t lease_end = INT64_MAX;
        if (cr__agent_lease_tick(a, cr_mono_ns(), &lease_end)) {
            dirty = 1;
        }
        if (dirty) {
            publish_live(a);
        }
        /* Sleep until the next timer, a signal or a wake-up. */
        mono = cr_mono_ns();
        int64_t until = next_sample < lease_end ? next_sample : lease_end;
        if (registered) {
            int64_t due = dirty ? mono : next_status;
            due = due < retry_at ? retry_at : due;
            until = due < until ? due : until;
        }
        if (!registered && next_register < until) {
            until = next_register;
        }
        for (size_t i = 0; i < a->nprocs; i++) {
            if (a->procs[i].state == CR_PROC_STOPPING) {
                int64_t k = a->procs[i].kill_at_ns;
                until = k < until ? k : until;
            }
        }
        if (end_mono && end_mono < until) {
            until = end_mono;
        }
        int64_t wait_ms = (until - mono) / CR_NS_PER_MS;
        wait_ms = wait_ms < 0 ? 0 : wait_ms > 1000 ? 1000 : wait_ms;
        struct pollfd pf[2] = {{sfd, POLLIN, 0}, {a->wake_rd, POLLIN, 0}};
        poll(pf, 2, (int)wait_ms);
    }
    return 0;
}

int cr_agent_main(int argc, char **argv)
{
    agent *a = cr_calloc(1, sizeof *a);
    char *faults_owned = NULL, *dev_dir_owned = NULL;
    int rc = 0, sfd = -1, pipefd[2] = {-1, -1};
    char err[512];
    agent_argv av = {0};
    a->power_cap_req = -1;
    pthread_mutex_init(&a->mu, NULL);
    a->heartbeat_ns = 5 * CR_NS_PER_SEC;
    if (cr__agent_argv_build(argc, argv, &av) != 0) {
        rc = 2;
        goto out;
    }
    int fr = parse_flags(av.argc, av.argv, &a->cfg, &faults_owned);
    if (fr != 0) {
        rc = fr == 1 ? 0 : 2;
        goto out;
    }
    /* Everything the agent writes is its own: 0700 dirs, 0600 files. */
    if (cr_mkdir_p(a->cfg.state_dir, 0755) < 0) { /* parents 0755; the state dir 0700 below */
        fprintf(stderr, "corral agent: --state-dir: cannot create %s: %s\n", a->cfg.state_dir,
                strerror(errno));
        rc = 1;
        goto out;
    }
    umask(077);
    if (cr_proc_fix_modes(a->cfg.state_dir) != 0) {
        fprintf(stderr,
                "corral agent: --state-dir %s: a shared directory (world-writable, sticky or "
                "not this user's); give the agent a directory of its own\n",
                a->cfg.state_dir);
        rc = 2;
        goto out;
    }
    if (cr__agent_cred_load(a) == 0) {
        cr_info("agent: node=%s: using its credential from %s/node.cred", a->cfg.node,
                a->cfg.state_dir);
    }
    int grc = cr_gpu_open(a->cfg.gpus, a->cfg.node, a->cfg.faults, &a->gpu, err, sizeof err);
    if (grc < 0) {
        fprintf(stderr, "corral agent: %s\n", err);
        /* A bad spec is bad usage (2); a missing driver is not (1). */
        rc = grc == CR_EUNAVAIL ? 1 : 2;
        goto out;
    }
    /* Signals arrive through a signalfd; block them in every thread. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0 || pipe2(pipefd, O_NONBLOCK | O_CLOEXEC) != 0) {
        fprintf(stderr, "corral agent: signalfd/pipe: %s\n", strerror(errno));
        rc = 1;
        goto out;
    }
    a->wake_rd = pipefd[0];
    a->wake_wr = pipefd[1];
    if (strcmp(a->cfg.cgroup, "auto") != 0 && strcmp(a->cfg.cgroup, "off") != 0 &&
        access(a->cfg.cgroup, W_OK) != 0) {
        fprintf(stderr, "corral agent: --cgroup: %s: %s\n", a->cfg.cgroup, strerror(errno));
        rc = 2;
        goto out_net;
    }
    char inst[17];
    if (load_instance_id(a->cfg.state_dir, inst) != 0) {
        fprintf(stderr, "corral agent: %s/instance.id: %s\n", a->cfg.state_dir, strerror(errno));
        rc = 1;
        goto out_net;
    }
    char *cg_name = cr_asprintf("%s-%s", a->cfg.node, inst);
    setup_devices(a, &dev_dir_owned);
    cr_iso_probe(&a->iso, a->cfg.cgroup, a->cfg.cgroup_v1, cg_name, dev_dir_owned);
    cr_iso_probe_pidns(&a->iso, a->cfg.job_pidns);
    free(cg_name);
    cr_iso_log(&a->iso);
    char unfit[1024];
    if (a->cfg.require_iso &&
        cr_iso_require(&a->iso, a->cfg.require_iso, unfit, sizeof unfit) > 0) {
        cr_error("agent: require_isolation %s: %s: this node takes no jobs", a->cfg.require_iso,
                 unfit);
        snprintf(a->unfit, sizeof a->unfit, "%.250s", unfit); /* the node's reason */
    }
    cr_iso_set_gpus(&a->iso, a->gpu->gpus, a->gpu->count, NULL, NULL);
    cr_ctr_probe(&a->ctr, a->cfg.podman, a->cfg.ctr_runtime);
    snprintf(a->ctr.owner, sizeof a->ctr.owner, "%s", inst);
    snprintf(a->ctr.state_dir, sizeof a->ctr.state_dir, "%s", a->cfg.state_dir);
    a->ctr.registries = a->cfg.registries;
    a->ctr.nregistries = a->cfg.nregistries;
    cr_ctr_log(&a->ctr, &a->iso);
    if (cr__agent_mps_init(a, err, sizeof err) < 0) {
        fprintf(stderr, "corral agent: %s\n", err);
        rc = 2;
        goto out_net;
    }
    /* Re-adopt what an earlier agent left running. */
    cr_proc_load_all(a->cfg.state_dir, &a->procs, &a->nprocs);
    cr__agent_lease_load(a); /* before the jobs' first turn: a lease that ran out stops them */
    a->procs_cap = a->nprocs;
    for (size_t i = 0; i < a->nprocs; i++) {
        cr_info("agent: job=%lld %s (pid %d)", (long long)a->procs[i].job,
                a->procs[i].state == CR_PROC_EXITED ? "ended while the agent was down"
                                                    : "still running: adopted",
                (int)a->procs[i].pid);
    }
    publish_live(a);
    sample_gpus(a, cr_mono_ns());
    render_metrics(a);
    if (cr__agent_http_start(a, err, sizeof err) < 0) {
        fprintf(stderr, "corral agent: %s\n", err);
        rc = 1;
        goto out_net;
    }
    cr_info("agent: node=%s gpus=%zu (%s) listen=%s:%d advertise=%s state=%s", a->cfg.node,
            a->gpu->count, a->gpu->ops->name, a->cfg.listen_host, a->port, a->cfg.advertise,
            a->cfg.state_dir);
    if (!a->cfg.metrics_token && !a->cfg.tls_client_ca) {
        cr_warn("agent: /metrics is open to whoever reaches %s:%d (jobs on this node too): "
                "corral_gpu_allocation is served without job, tenant and service labels; set "
                "--metrics-token-file or --tls-client-ca for them",
                a->cfg.listen_host, a->port);
    }
    if (a->cfg.tls_client_ca) {
        cr_info("agent: mutual TLS: callers must show a certificate signed by %s",
                a->cfg.tls_client_ca);
    }
    /* A one-line readiness report on stdout for scripts (the port may be 0). */
    printf("agent %s listening on %s:%d\n", a->cfg.node, a->cfg.listen_host, a->port);
    fflush(stdout);
    if (cr__agent_data_start(a) != 0) {
        rc = 1;
        goto out_http;
    }
    if (cr__agent_poller_start(a) < 0) {
        fprintf(stderr, "corral agent: cannot start the poller thread\n");
        rc = 1;
        goto out_http;
    }
    run(a, sfd);
    atomic_store(&a->stop, 1);
    cr__agent_poller_join(a);
    if (a->cfg.kill_on_exit) {
        atomic_store(&a->stop, 0); /* let the last status go out */
        stop_all_and_wait(a, sfd);
        atomic_store(&a->stop, 1);
    }
    cr__agent_mps_fini(a);
out_http:
    atomic_store(&a->stop, 1);
    cr__agent_poller_join(a);
    cr__agent_http_stop(a);
    cr__agent_data_stop(a);
out_net:
    cr_client_free(a->status_cl);
    a->status_cl = NULL;
out:
    for (size_t i = 0; i < a->nprocs; i++) {
        cr_proc_fini(&a->procs[i]);
    }
    free(a->procs);
    cr_desired_fini(&a->desired);
    if (a->pending) {
        cr_desired_fini(a->pending);
        free(a->pending);
    }
    cr_gpu_close(a->gpu);
    free(a->metrics_text);
    free(a->live);
    if (a->step_creds) {
        sodium_memzero(a->step_creds, a->step_creds_cap * sizeof *a->step_creds);
    }
    free(a->step_creds);
    cr__agent_ctr_fini(a);
    cr_iso_fini(&a->iso); /* removes the cgroup dirs only when empty: adopted jobs keep theirs */
    free(dev_dir_owned);
    free(a->cfg.join_token);
    cr_auth_secret_free(a->cfg.metrics_token);
    free(a->cfg.task_env);
    free(a->cfg.labels);
    free(a->cfg.registries);
    free(faults_owned);
    if (sfd >= 0) {
        close(sfd);
    }
    if (pipefd[0] >= 0) {
        close(pipefd[0]);
        close(pipefd[1]);
    }
    pthread_mutex_destroy(&a->mu);
    free(a);
    cr__agent_argv_free(&av);
    return rc;
}
