// Reference runner: executes tidemark window scenarios (tools/flinkref/SCENARIO.md) on real Apache Flink 1.20.
//
// Usage: java -cp build:<pyflink/lib/*> FlinkRef scenarios.json out.json
//
// One JVM, one MiniCluster; every scenario is its own DataStream job (parallelism 1):
//   legacy SourceFunction (records via collectWithTimestamp, punctuated watermarks via emitWatermark)
//   -> keyBy(f0) / windowAll -> window(assigner) [.trigger] [.evictor] .allowedLateness .sideOutputLateData
//   -> process / reduce+PWF / aggregate+PWF
//   -> chained Recorder operators (main output + late side output) that append to one shared list.
// The recorders are chained to the window operator (asserted: the job graph has exactly 2 vertices), so
// appending in call order gives the exact emission order of the window operator, including the
// watermarks it forwards (Recorder.processWatermark).
// Written from scratch for tidemark; no Flink source code is copied.

import java.io.File;
import java.io.Serializable;
import java.lang.reflect.Field;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.util.SerializedThrowable;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.JsonNodeFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.streaming.api.datastream.AllWindowedStream;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.datastream.WindowedStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.source.SourceFunction;
import org.apache.flink.streaming.api.functions.windowing.ProcessAllWindowFunction;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.functions.windowing.delta.DeltaFunction;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.ChainingStrategy;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.api.windowing.assigners.DynamicEventTimeSessionWindows;
import org.apache.flink.streaming.api.windowing.assigners.EventTimeSessionWindows;
import org.apache.flink.streaming.api.windowing.assigners.GlobalWindows;
import org.apache.flink.streaming.api.windowing.assigners.SessionWindowTimeGapExtractor;
import org.apache.flink.streaming.api.windowing.assigners.SlidingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.WindowAssigner;
import org.apache.flink.streaming.api.windowing.evictors.CountEvictor;
import org.apache.flink.streaming.api.windowing.evictors.DeltaEvictor;
import org.apache.flink.streaming.api.windowing.evictors.Evictor;
import org.apache.flink.streaming.api.windowing.evictors.TimeEvictor;
import org.apache.flink.streaming.api.windowing.triggers.ContinuousEventTimeTrigger;
import org.apache.flink.streaming.api.windowing.triggers.CountTrigger;
import org.apache.flink.streaming.api.windowing.triggers.DeltaTrigger;
import org.apache.flink.streaming.api.windowing.triggers.EventTimeTrigger;
import org.apache.flink.streaming.api.windowing.triggers.PurgingTrigger;
import org.apache.flink.streaming.api.windowing.triggers.Trigger;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.streaming.api.windowing.windows.Window;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

@SuppressWarnings({"unchecked", "rawtypes", "serial"})
public class FlinkRef {

    static final ObjectMapper MAPPER = new ObjectMapper();
    static final JsonNodeFactory NF = JsonNodeFactory.instance;

    /** Output of every running job, by job slot id. Recorders run in this JVM (MiniCluster). */
    static final Map<Integer, List<JsonNode>> OUT = new ConcurrentHashMap<>();

    /** Cap on records per scenario: some trigger set-ups never stop firing (see FINDINGS.md). */
    static final int MAX_OUTPUT = Integer.parseInt(System.getenv().getOrDefault("FLINKREF_MAX_OUTPUT", "10000"));

    static final class OutputLimitExceeded extends RuntimeException {
        OutputLimitExceeded(String msg) {
            super(msg);
        }
    }

    static void record(int id, JsonNode n) {
        List<JsonNode> l = OUT.get(id);
        if (l.size() >= MAX_OUTPUT) {
            throw new OutputLimitExceeded("output limit of " + MAX_OUTPUT + " records exceeded (FLINKREF_MAX_OUTPUT)");
        }
        l.add(n);
    }

    // ------------------------------------------------------------------------------------------
    // Source: replays the event list exactly; watermarks are punctuated, at their position.

    static final class Ev implements Serializable {
        final boolean isWatermark;
        final String key;
        final long value;
        final long ts;

        Ev(boolean isWatermark, String key, long value, long ts) {
            this.isWatermark = isWatermark;
            this.key = key;
            this.value = value;
            this.ts = ts;
        }
    }

    static final class ReplaySource implements SourceFunction<Tuple2<String, Long>> {
        private final ArrayList<Ev> events;

        ReplaySource(ArrayList<Ev> events) {
            this.events = events;
        }

        @Override
        public void run(SourceContext<Tuple2<String, Long>> ctx) {
            for (Ev e : events) {
                synchronized (ctx.getCheckpointLock()) {
                    if (e.isWatermark) {
                        ctx.emitWatermark(new Watermark(e.ts));
                    } else {
                        ctx.collectWithTimestamp(Tuple2.of(e.key, e.value), e.ts);
                    }
                }
            }
            // returning ends the source; Flink then sends the final MAX watermark by itself.
        }

        @Override
        public void cancel() {}
    }

    // ------------------------------------------------------------------------------------------
    // Recorders, chained to the window operator.

    /** Main output: window results (JSON strings from the functions) and forwarded watermarks. */
    static final class ResultRecorder extends AbstractStreamOperator<Void>
            implements OneInputStreamOperator<String, Void> {
        private final int id;

        ResultRecorder(int id) {
            this.id = id;
            setChainingStrategy(ChainingStrategy.ALWAYS);
        }

        @Override
        public void processElement(StreamRecord<String> element) throws Exception {
            ObjectNode r = (ObjectNode) MAPPER.readTree(element.getValue());
            ObjectNode res = NF.objectNode();
            res.set("key", r.get("key"));
            res.set("start", r.get("start"));
            res.set("end", r.get("end"));
            res.set("value", r.get("value"));
            if (element.hasTimestamp()) {
                res.put("ts", element.getTimestamp());
            } else {
                res.putNull("ts");
            }
            res.set("watermark", r.get("watermark"));
            ObjectNode o = NF.objectNode();
            o.set("result", res);
            record(id, o);
        }

        @Override
        public void processWatermark(Watermark mark) throws Exception {
            ObjectNode o = NF.objectNode();
            o.put("watermark", mark.getTimestamp());
            record(id, o);
            super.processWatermark(mark);
        }
    }

    /** Late-data side output. Watermarks also reach this chain; they are recorded only on the main path. */
    static final class LateRecorder extends AbstractStreamOperator<Void>
            implements OneInputStreamOperator<Tuple2<String, Long>, Void> {
        private final int id;

        LateRecorder(int id) {
            this.id = id;
            setChainingStrategy(ChainingStrategy.ALWAYS);
        }

        @Override
        public void processElement(StreamRecord<Tuple2<String, Long>> element) {
            ObjectNode late = NF.objectNode();
            late.put("key", element.getValue().f0);
            late.put("value", element.getValue().f1);
            if (element.hasTimestamp()) {
                late.put("ts", element.getTimestamp());
            } else {
                late.putNull("ts");
            }
            ObjectNode o = NF.objectNode();
            o.set("late", late);
            record(id, o);
        }
    }

    // ------------------------------------------------------------------------------------------
    // Functions

    static String resultJson(String key, Window w, JsonNode value, long watermark) {
        ObjectNode r = NF.objectNode();
        if (key == null) {
            r.putNull("key");
        } else {
            r.put("key", key);
        }
        if (w instanceof TimeWindow) {
            r.put("start", ((TimeWindow) w).getStart());
            r.put("end", ((TimeWindow) w).getEnd());
        } else {
            r.putNull("start");
            r.putNull("end");
        }
        r.set("value", value);
        r.put("watermark", watermark);
        return r.toString();
    }

    /** function "process": all values in iteration order; "reduce": the one sum; "aggregate": [sum, count]. */
    static JsonNode valueOf(String function, Iterable<?> elements) {
        if (function.equals("process")) {
            ArrayNode a = NF.arrayNode();
            for (Object o : elements) {
                a.add(((Tuple2<String, Long>) o).f1);
            }
            return a;
        }
        Object only = null;
        int n = 0;
        for (Object o : elements) {
            only = o;
            n++;
        }
        if (n != 1) {
            throw new IllegalStateException("expected exactly one pre-aggregated element, got " + n);
        }
        if (only == null) {
            // reduce over an empty (fully evicted) window: Flink passes a single null to the function
            return NF.nullNode();
        }
        if (function.equals("reduce")) {
            return NF.numberNode(((Tuple2<String, Long>) only).f1);
        }
        long[] acc = (long[]) only;
        ArrayNode a = NF.arrayNode();
        a.add(acc[0]);
        a.add(acc[1]);
        return a;
    }

    static final class KeyedPWF extends ProcessWindowFunction<Object, String, String, Window> {
        private final String function;

        KeyedPWF(String function) {
            this.function = function;
        }

        @Override
        public void process(String key, Context ctx, Iterable<Object> elements, Collector<String> out) {
            out.collect(resultJson(key, ctx.window(), valueOf(function, elements), ctx.currentWatermark()));
        }
    }

    /**
     * Non-keyed: ProcessAllWindowFunction's Context has no currentWatermark(); the operator's internal
     * context behind it does, so it is read reflectively (same WindowOperator, same timer service).
     */
    static final class AllPWF extends ProcessAllWindowFunction<Object, String, Window> {
        private final String function;
        private transient Field internalField;

        AllPWF(String function) {
            this.function = function;
        }

        @Override
        public void process(Context ctx, Iterable<Object> elements, Collector<String> out) throws Exception {
            if (internalField == null) {
                internalField = ctx.getClass().getDeclaredField("internalContext");
                internalField.setAccessible(true);
            }
            Object internal = internalField.get(ctx);
            long wm = (long) internal.getClass().getMethod("currentWatermark").invoke(internal);
            out.collect(resultJson(null, ctx.window(), valueOf(function, elements), wm));
        }
    }

    static final class SumReduce implements ReduceFunction<Tuple2<String, Long>> {
        @Override
        public Tuple2<String, Long> reduce(Tuple2<String, Long> a, Tuple2<String, Long> b) {
            return Tuple2.of(a.f0, a.f1 + b.f1);
        }
    }

    static final class SumCountAgg implements AggregateFunction<Tuple2<String, Long>, long[], long[]> {
        @Override
        public long[] createAccumulator() {
            return new long[] {0L, 0L};
        }

        @Override
        public long[] add(Tuple2<String, Long> v, long[] acc) {
            return new long[] {acc[0] + v.f1, acc[1] + 1};
        }

        @Override
        public long[] getResult(long[] acc) {
            return new long[] {acc[0], acc[1]};
        }

        @Override
        public long[] merge(long[] a, long[] b) {
            return new long[] {a[0] + b[0], a[1] + b[1]};
        }
    }

    static final class ValueDelta implements DeltaFunction<Tuple2<String, Long>> {
        @Override
        public double getDelta(Tuple2<String, Long> oldPoint, Tuple2<String, Long> newPoint) {
            return Math.abs((double) newPoint.f1 - (double) oldPoint.f1);
        }
    }

    static final class GapByValue implements SessionWindowTimeGapExtractor<Tuple2<String, Long>> {
        private final long unit;

        GapByValue(long unit) {
            this.unit = unit;
        }

        @Override
        public long extract(Tuple2<String, Long> e) {
            return unit * (1 + Math.floorMod(e.f1, 4L));
        }
    }

    static final class KeyOf implements KeySelector<Tuple2<String, Long>, String> {
        @Override
        public String getKey(Tuple2<String, Long> e) {
            return e.f0;
        }
    }

    // ------------------------------------------------------------------------------------------
    // Scenario -> job

    static final TypeInformation<Tuple2<String, Long>> ELEM = Types.TUPLE(Types.STRING, Types.LONG);

    static Duration ms(JsonNode n, String field, long dflt) {
        JsonNode v = n.get(field);
        return Duration.ofMillis(v == null || v.isNull() ? dflt : v.asLong());
    }

    static WindowAssigner assigner(JsonNode a) {
        String type = a.get("type").asText();
        switch (type) {
            case "TumblingEventTimeWindows":
                return TumblingEventTimeWindows.of(ms(a, "size", 0), ms(a, "offset", 0));
            case "SlidingEventTimeWindows":
                return SlidingEventTimeWindows.of(ms(a, "size", 0), ms(a, "slide", 0), ms(a, "offset", 0));
            case "EventTimeSessionWindows":
                return EventTimeSessionWindows.withGap(ms(a, "gap", 0));
            case "DynamicEventTimeSessionWindows":
                return DynamicEventTimeSessionWindows.withDynamicGap(new GapByValue(a.get("gap_unit").asLong()));
            case "GlobalWindows":
                return GlobalWindows.create();
            default:
                throw new IllegalArgumentException("unknown assigner " + type);
        }
    }

    static Trigger trigger(JsonNode t) {
        String type = t.get("type").asText();
        switch (type) {
            case "EventTimeTrigger":
                return EventTimeTrigger.create();
            case "CountTrigger":
                return CountTrigger.of(t.get("count").asLong());
            case "PurgingTrigger":
                return PurgingTrigger.of(trigger(t.get("inner")));
            case "ContinuousEventTimeTrigger":
                return ContinuousEventTimeTrigger.of(ms(t, "interval", 0));
            case "DeltaTrigger":
                TypeSerializer<Tuple2<String, Long>> ser = ELEM.createSerializer(new SerializerConfigImpl());
                return DeltaTrigger.of(t.get("threshold").asDouble(), new ValueDelta(), ser);
            default:
                throw new IllegalArgumentException("unknown trigger " + type);
        }
    }

    static Evictor evictor(JsonNode e) {
        String type = e.get("type").asText();
        boolean after = e.has("after") && e.get("after").asBoolean();
        switch (type) {
            case "CountEvictor":
                return CountEvictor.of(e.get("count").asLong(), after);
            case "TimeEvictor":
                return TimeEvictor.of(ms(e, "interval", 0), after);
            case "DeltaEvictor":
                return DeltaEvictor.of(e.get("threshold").asDouble(), new ValueDelta(), after);
            default:
                throw new IllegalArgumentException("unknown evictor " + type);
        }
    }

    static boolean present(JsonNode s, String f) {
        return s.has(f) && !s.get(f).isNull();
    }

    static JobGraph buildJob(JsonNode s, int id) {
        Configuration conf = new Configuration();
        conf.set(PipelineOptions.AUTO_WATERMARK_INTERVAL, Duration.ZERO);
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1, conf);
        env.setParallelism(1);
        env.getConfig().setAutoWatermarkInterval(0);

        ArrayList<Ev> events = new ArrayList<>();
        for (JsonNode ev : s.get("events")) {
            if (ev.has("watermark")) {
                events.add(new Ev(true, null, 0, ev.get("watermark").asLong()));
            } else {
                JsonNode el = ev.get("element");
                JsonNode k = el.get("key");
                events.add(new Ev(false, k == null || k.isNull() ? null : k.asText(),
                        el.get("value").asLong(), el.get("ts").asLong()));
            }
        }
        DataStream<Tuple2<String, Long>> src = env.addSource(new ReplaySource(events), "replay", ELEM);

        boolean keyed = !s.has("keyed") || s.get("keyed").asBoolean();
        String function = s.get("function").asText();
        OutputTag<Tuple2<String, Long>> lateTag = new OutputTag<>("late", ELEM);
        boolean sideOutput = s.has("side_output") && s.get("side_output").asBoolean();
        long lateness = present(s, "allowed_lateness") ? s.get("allowed_lateness").asLong() : 0L;

        SingleOutputStreamOperator<String> results;
        if (keyed) {
            WindowedStream ws = src.keyBy(new KeyOf(), Types.STRING).window(assigner(s.get("assigner")));
            if (present(s, "trigger")) ws = ws.trigger(trigger(s.get("trigger")));
            if (present(s, "evictor")) ws = ws.evictor(evictor(s.get("evictor")));
            ws = ws.allowedLateness(Duration.ofMillis(lateness));
            if (sideOutput) ws = ws.sideOutputLateData(lateTag);
            KeyedPWF pwf = new KeyedPWF(function);
            switch (function) {
                case "process":
                    results = ws.process(pwf, Types.STRING);
                    break;
                case "reduce":
                    results = ws.reduce(new SumReduce(), pwf, Types.STRING);
                    break;
                case "aggregate":
                    results = ws.aggregate(new SumCountAgg(),
                            pwf, TypeInformation.of(long[].class), TypeInformation.of(long[].class), Types.STRING);
                    break;
                default:
                    throw new IllegalArgumentException("unknown function " + function);
            }
        } else {
            AllWindowedStream ws = src.windowAll(assigner(s.get("assigner")));
            if (present(s, "trigger")) ws = ws.trigger(trigger(s.get("trigger")));
            if (present(s, "evictor")) ws = ws.evictor(evictor(s.get("evictor")));
            ws = ws.allowedLateness(Duration.ofMillis(lateness));
            if (sideOutput) ws = ws.sideOutputLateData(lateTag);
            AllPWF pwf = new AllPWF(function);
            switch (function) {
                case "process":
                    results = ws.process(pwf, Types.STRING);
                    break;
                case "reduce":
                    results = ws.reduce(new SumReduce(), pwf, Types.STRING);
                    break;
                case "aggregate":
                    results = ws.aggregate(new SumCountAgg(),
                            pwf, TypeInformation.of(long[].class), TypeInformation.of(long[].class), Types.STRING);
                    break;
                default:
                    throw new IllegalArgumentException("unknown function " + function);
            }
        }
        results.transform("record-results", Types.VOID, new ResultRecorder(id));
        if (sideOutput) {
            results.getSideOutput(lateTag).transform("record-late", Types.VOID, new LateRecorder(id));
        }
        StreamGraph sg = env.getStreamGraph();
        sg.setJobName("flinkref-" + s.get("name").asText());
        JobGraph jg = sg.getJobGraph();
        if (jg.getNumberOfVertices() != 2) {
            throw new IllegalStateException("expected source + one chained window task, got "
                    + jg.getNumberOfVertices() + " vertices; emission order would not be exact");
        }
        return jg;
    }

    // ------------------------------------------------------------------------------------------

    static long TIMEOUT_S;

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: FlinkRef scenarios.json out.json");
            System.exit(2);
        }
        JsonNode scenarios = MAPPER.readTree(new File(args[0]));
        if (!scenarios.isArray()) {
            throw new IllegalArgumentException("scenario file must hold a JSON list");
        }
        Configuration conf = new Configuration();
        conf.set(RestOptions.BIND_PORT, "0");
        TIMEOUT_S = Long.parseLong(System.getenv().getOrDefault("FLINKREF_TIMEOUT_S", "60"));
        int jobs = Integer.parseInt(System.getenv().getOrDefault("FLINKREF_JOBS", "4"));
        conf.set(TaskManagerOptions.NUM_TASK_SLOTS, Math.max(jobs, 1));
        MiniClusterConfiguration mcc = new MiniClusterConfiguration.Builder()
                .setConfiguration(conf)
                .setNumTaskManagers(1)
                .setNumSlotsPerTaskManager(Math.max(jobs, 1))
                .build();
        List<JsonNode> list = new ArrayList<>();
        java.util.Set<String> names = new java.util.HashSet<>();
        for (JsonNode s : scenarios) {
            String name = s.get("name").asText();
            if (!names.add(name)) {
                throw new IllegalArgumentException("duplicate scenario name " + name);
            }
            list.add(s);
        }
        JsonNode[] outputs = new JsonNode[list.size()];
        java.util.concurrent.atomic.AtomicInteger failures = new java.util.concurrent.atomic.AtomicInteger();
        boolean verbose = System.getenv("FLINKREF_VERBOSE") != null;
        long t0 = System.nanoTime();
        try (MiniCluster mc = new MiniCluster(mcc)) {
            mc.start();
            long tStart = System.nanoTime();
            System.err.printf("flinkref: MiniCluster started in %.2f s, %d concurrent jobs%n",
                    (tStart - t0) / 1e9, jobs);
            java.util.concurrent.ExecutorService pool =
                    java.util.concurrent.Executors.newFixedThreadPool(Math.max(jobs, 1));
            List<java.util.concurrent.Future<?>> futures = new ArrayList<>();
            for (int i = 0; i < list.size(); i++) {
                final int id = i;
                futures.add(pool.submit(() -> {
                    JsonNode s = list.get(id);
                    String name = s.get("name").asText();
                    OUT.put(id, Collections.synchronizedList(new ArrayList<>()));
                    long ts0 = System.nanoTime();
                    try {
                        JobGraph jg = buildJob(s, id);
                        mc.submitJob(jg).get();
                        JobResult jr;
                        try {
                            jr = mc.requestJobResult(jg.getJobID()).get(TIMEOUT_S, java.util.concurrent.TimeUnit.SECONDS);
                        } catch (java.util.concurrent.TimeoutException te) {
                            mc.cancelJob(jg.getJobID()).get();
                            throw new RuntimeException("timeout: job did not finish within " + TIMEOUT_S
                                    + " s (FLINKREF_TIMEOUT_S)");
                        }
                        if (!jr.isSuccess()) {
                            Throwable t = jr.getSerializedThrowable().isPresent()
                                    ? jr.getSerializedThrowable().get().deserializeError(FlinkRef.class.getClassLoader())
                                    : new RuntimeException("job failed: " + jr.getApplicationStatus());
                            throw t;
                        }
                        ArrayNode arr = NF.arrayNode();
                        arr.addAll(OUT.get(id));
                        outputs[id] = arr;
                    } catch (Throwable e) {
                        failures.incrementAndGet();
                        Throwable root = e;
                        while (root.getCause() != null && root.getCause() != root) root = root.getCause();
                        ObjectNode err = NF.objectNode();
                        String msg = root instanceof SerializedThrowable
                                ? ((SerializedThrowable) root).getOriginalErrorClassName() + ": " + root.getMessage()
                                : root.getClass().getName() + ": " + root.getMessage();
                        err.put("error", msg);
                        ArrayNode partial = NF.arrayNode();
                        List<JsonNode> got = OUT.get(id);
                        synchronized (got) {
                            for (int k = 0; k < Math.min(got.size(), 40); k++) partial.add(got.get(k));
                        }
                        err.set("partial_output_head", partial);
                        outputs[id] = err;
                        System.err.println("flinkref: scenario " + name + " FAILED: " + err.get("error").asText());
                    } finally {
                        OUT.remove(id);
                    }
                    if (verbose) {
                        System.err.printf("flinkref: %s %.3f s%n", name, (System.nanoTime() - ts0) / 1e9);
                    }
                }));
            }
            for (java.util.concurrent.Future<?> f : futures) f.get();
            pool.shutdown();
            long tEnd = System.nanoTime();
            int n = list.size();
            System.err.printf("flinkref: %d scenarios in %.2f s (%.3f s/scenario wall), %d failed%n",
                    n, (tEnd - tStart) / 1e9, n == 0 ? 0.0 : (tEnd - tStart) / 1e9 / n, failures.get());
        }
        ObjectNode result = NF.objectNode();
        for (int i = 0; i < list.size(); i++) {
            result.set(list.get(i).get("name").asText(), outputs[i]);
        }
        MAPPER.writeValue(new File(args[1]), result);
        System.exit(failures.get() == 0 ? 0 : 1);
    }
}
