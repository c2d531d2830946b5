// Every fuzz target, for code that replays inputs through all of them (the regression test).
// A new target is a header in fuzz/targets/ (it registers itself) plus its include line here.
#pragma once

#include "fuzz/fuzz_target.h"
#include "fuzz/targets/chat_template.h"
#include "fuzz/targets/gguf.h"
#include "fuzz/targets/http_request.h"
#include "fuzz/targets/kv_state.h"
#include "fuzz/targets/task_file.h"
#include "fuzz/targets/tokenizer.h"
