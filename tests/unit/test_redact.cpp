#include "common/redact.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using nlohmann::json;

TEST(Redact, CredentialsInUrls) {
  EXPECT_EQ(tp::redact_text("https://user:pass@host/x"), "https://<redacted>@host/x");
  EXPECT_EQ(tp::redact_text("git+ssh://ghp_abc@github.com/o/r and http://host/a@b"),
            "git+ssh://<redacted>@github.com/o/r and http://host/a@b");
  EXPECT_EQ(tp::redact_text("tcp://10.0.0.1:4000"), "tcp://10.0.0.1:4000");
}

TEST(Redact, BearerTokensAndAuthorizationHeaders) {
  EXPECT_EQ(tp::redact_text("Bearer eyJhbGciOi.x-y_z"), "Bearer <redacted>");
  EXPECT_EQ(tp::redact_text("h=bearer  abc123;x=1"), "h=bearer  <redacted>;x=1");
  EXPECT_EQ(tp::redact_text("Authorization: Basic dXNlcjpwYXNz"),
            "Authorization: Basic <redacted>");
  EXPECT_EQ(tp::redact_text("authorization=abc"), "authorization=<redacted>");
  EXPECT_EQ(tp::redact_text("no bearers here"), "no bearers here");
}

TEST(Redact, SecretPairsKeepTheirNames) {
  EXPECT_EQ(tp::redact_text("mode=fast,token=abc,level=2"), "mode=fast,token=<redacted>,level=2");
  EXPECT_EQ(tp::redact_text("env HF_TOKEN=hf_x mpirun -np 2"),
            "env HF_TOKEN=<redacted> mpirun -np 2");
  EXPECT_EQ(tp::redact_text("https://h/p?api_key=k1&x=2"), "https://h/p?api_key=<redacted>&x=2");
  EXPECT_EQ(tp::redact_text("password = \"a b\" next"), "password = <redacted> next");
  EXPECT_EQ(tp::redact_text("Secret: 'x y'\nkey=v"), "Secret: <redacted>\nkey=<redacted>");
  EXPECT_EQ(tp::redact_text("db_passwd=p --credentials=c"),
            "db_passwd=<redacted> --credentials=<redacted>");
  // A name without a value, or a secret word in a plain sentence, is left alone.
  EXPECT_EQ(tp::redact_text("token= "), "token= ");
  EXPECT_EQ(tp::redact_text("the keyboard layout\n"), "the keyboard layout\n");
  EXPECT_EQ(tp::redact_text("checkpoint.keep=2 lr=0.05"), "checkpoint.keep=2 lr=0.05");
}

TEST(Redact, RedactingTwiceChangesNothing) {
  for (const char* text :
       {"https://u:p@h", "Bearer t", "Authorization: Basic x", "token=v", "a password: 'q'"}) {
    const std::string once = tp::redact_text(text);
    EXPECT_NE(once, text);
    EXPECT_EQ(tp::redact_text(once), once);
  }
}

TEST(Redact, CommandLinesRedactEachWordAndTheValueOfASecretFlag) {
  EXPECT_EQ(tp::redact_argv({"trainproof", "drill", "--launcher", "env HF_TOKEN=x mpirun",
                             "--api-token", "abc", "--", "-", "--report", "r.json"}),
            (std::vector<std::string>{"trainproof", "drill", "--launcher",
                                      "env HF_TOKEN=<redacted> mpirun", "--api-token", "<redacted>",
                                      "--", "-", "--report", "r.json"}));
}

TEST(Redact, SecretNamesAndTheTransportKey) {
  for (const char* name :
       {"SLURM_AUTH_TOKEN", "NCCL_IB_KEY_FILE", "FI_secret_thing", "OMPI_MCA_PASSWORD",
        "UCX_PASSWD", "SLURM_JWT", "X_CREDENTIALS", "OMPI_MCA_orte_precondition_transports",
        "OMPI_MCA_opal_precondition_transports"})
    EXPECT_TRUE(tp::secret_name(name)) << name;
  for (const char* name : {"SLURM_JOB_ID", "NCCL_DEBUG", "OMPI_COMM_WORLD_RANK"})
    EXPECT_FALSE(tp::secret_name(name)) << name;
}

TEST(Redact, HighEntropyWords) {
  for (const char* word :
       {"hf_Qm7XpL2vKd9RtY4wZs8NbJ3cHf6GaE1uVo", "ba2b7f570bbcf862e470586a6e0e125b",
        "AKIAP1UGA810MO0HRUZE", "ghp_d6rZ94tDuOXiLzosakEL2xYHiL54z0zdO2fe"})
    EXPECT_TRUE(tp::high_entropy_word(word)) << word << " " << tp::entropy_bits_per_char(word);
  // Too short, no digit, no letter, or words of a name.
  for (const char* word : {"Qm7XpL2vKd9RtY4wZs8", "OMPI_MCA_btl_tcp_if_include",
                           "12345678901234567890", "ompi_global_scope_dbe6be8f",
                           "x86_64-linux-gnu-gcc-12-build", "job_2024_01_15_resnet50_bs256"})
    EXPECT_FALSE(tp::high_entropy_word(word)) << word << " " << tp::entropy_bits_per_char(word);
  EXPECT_DOUBLE_EQ(tp::entropy_bits_per_char("abab"), 1.0);
  EXPECT_DOUBLE_EQ(tp::entropy_bits_per_char("aaaa"), 0.0);
}

TEST(Redact, VariablesByNameByShapeAndByEntropyUnlessKnownSafe) {
  const std::string key = "5f2a9c81d04e7b36a1c9e8f20b7d4c53";
  EXPECT_EQ(tp::redact_variable("OMPI_MCA_orte_precondition_transports", "ba2b7f57-e470586a"),
            "<redacted>");
  EXPECT_EQ(tp::redact_variable("OMPI_MCA_foo", "https://user:pass@host"),
            "https://<redacted>@host");
  EXPECT_EQ(tp::redact_variable("UCX_HEADER", "Bearer abc"), "Bearer <redacted>");
  EXPECT_EQ(tp::redact_variable("FI_OPTS", "a=1,token=t"), "a=1,token=<redacted>");
  EXPECT_EQ(tp::redact_variable("OMPI_MCA_tag", "id:" + key + ",n=2"), "id:<redacted>,n=2");
  // Known safe: ids, GPU lists and tuning keep their values.
  for (const char* name : {"SLURM_JOB_ID", "SLURM_STEP_TAG", "NCCL_COMM_ID", "OMPI_ARGV"})
    EXPECT_EQ(tp::redact_variable(name, key), key) << name;
  const std::string gpus =
      "GPU-8f6c9b1e-3a2d-4c5b-9e8f-1a2b3c4d5e6f,MIG-4e8a0f4b-7b1d-5c2e-9f3a-1b2c3d4e5f6a";
  EXPECT_EQ(tp::redact_variable("CUDA_VISIBLE_DEVICES", gpus), gpus);
  EXPECT_TRUE(tp::safe_variable("CUDA_VISIBLE_DEVICES"));
  // Patterns apply to safe variables too.
  EXPECT_EQ(tp::redact_variable("SLURM_JOB_COMMENT", "token=t"), "token=<redacted>");
  // What the report needs from the usual Open MPI variables survives.
  for (const char* value : {"1605763072.0;tcp://192.0.2.2:35775;tcp6://[fd00::2]:38939",
                            "/tmp/ompi.vm.0/pid.13128/0/0", "^s1,s2,cray,isolated", "mlx5_0:1"})
    EXPECT_EQ(tp::redact_variable("OMPI_MCA_x", value), value);
}

TEST(Redact, OptionsByNameAndValue) {
  const json options = {{"report", "r.json"},
                        {"launcher", "env A_TOKEN=x mpirun"},
                        {"fault", {"kill:rank=1,step=3", "x password=y"}},
                        {"db.password", "p"},
                        {"train.steps", 12}};
  EXPECT_EQ(tp::redact_options(options),
            (json{{"report", "r.json"},
                  {"launcher", "env A_TOKEN=<redacted> mpirun"},
                  {"fault", {"kill:rank=1,step=3", "x password=<redacted>"}},
                  {"db.password", "<redacted>"},
                  {"train.steps", 12}}));
}

TEST(MessageText, ControlBytesAndInvalidUtf8AreEscapedAndSecretsRedacted) {
  EXPECT_EQ(tp::message_text("cost.currency='US\x1b[2J'"), "cost.currency='US\\x1B[2J'");
  EXPECT_EQ(tp::message_text("gate.file: '\xff"
                             "12' is invalid\a"),
            "gate.file: '\\xFF12' is invalid\\x07");
  EXPECT_EQ(tp::message_text("r\xc3\xa9sum\xc3\xa9 stays"), "r\xc3\xa9sum\xc3\xa9 stays");
  const std::string url =
      tp::message_text("data.dir 's3://alice:hunter2@bucket/d' holds no dataset");
  EXPECT_EQ(url.find("hunter2"), std::string::npos) << url;
  EXPECT_NE(url.find("holds no dataset"), std::string::npos) << url;
}
