"""The evaluation step's data (``step_specs._evaluate_step``): the held-out questions it asks, the system prompt
it asks them with and its work folder."""

HELD_OUT = (
    (
        "Janet’s ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her "
        "friends every day with four. She sells the remainder at the farmers' market daily for $2 per fresh duck egg. "
        "How much in dollars does she make every day at the farmers' market?",
        "18",
    ),
    ("A robe takes 2 bolts of blue fiber and half that much white fiber.  How many bolts in total does it take?", "3"),
    (
        "Josh decides to try flipping a house.  He buys a house for $80,000 and then puts in $50,000 in repairs.  This "
        "increased the value of the house by 150%.  How much profit did he make?",
        "70000",
    ),
    (
        "James decides to run 3 sprints 3 times a week.  He runs 60 meters each sprint.  How many total meters does he "
        "run a week?",
        "540",
    ),
    (
        "Every day, Wendi feeds each of her chickens three cups of mixed chicken feed, containing seeds, mealworms and "
        "vegetables to help keep them healthy.  She gives the chickens their feed in three separate meals. In the "
        "morning, she gives her flock of chickens 15 cups of feed.  In the afternoon, she gives her chickens another "
        "25 cups of feed.  How many cups of feed does she need to give her chickens in the final meal of the day if "
        "the size of Wendi's flock is 20 chickens?",
        "20",
    ),
)
"""The evaluation's questions and answers: the first five of GSM8K's test split (``openai/gsm8k``, ``main``, MIT
licence), held out from both datasets (training reads GSM8K's train split; OpenMathInstruct-2 is synthesised from
GSM8K's and MATH's training sets)."""
SYSTEM_PROMPT = (
    "You are given a problem. Think about the problem and provide your reasoning. Place it between {reasoning_start} "
    "and {reasoning_end}. Then, provide the final answer (i.e., just one numerical value) between {solution_start} "
    "and {solution_end}."
)
"""The ``SYSTEM_PROMPT`` of training's data template (``core.knobs.PLAIN_TEMPLATE``,
``maxtext/examples/chat_templates/openmathinstruct2_rl.json``), its tokens rl.yml's unless the stack sets them."""
EVALUATE_WORK = "/scratch/evaluate"
