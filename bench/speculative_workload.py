"""A summarization workload for prompt-lookup drafts: reports, each asked to be summarized with its
key facts quoted, so good answers copy spans of their prompt (names, figures, whole phrases)."""

from __future__ import annotations

from tokenizers import Tokenizer

from prebuild.artifact import ensure_artifact

SUMMARIES = (
    "The city council of Northbridge approved a budget of 48 million euros for 2027. The largest "
    "share, 19 million euros, goes to the renovation of the central library and the three primary "
    "schools on Canal Street. Public transport receives 11 million euros for twelve electric buses "
    "and a new night line between the station and the hospital. The council also froze property "
    "taxes for the second year in a row and created a fund of 2 million euros for small shops "
    "affected by the construction works on Market Square.",
    "Researchers at the Lindqvist Institute measured the water quality of Lake Varden every week "
    "from March to October. Nitrate levels fell by 23 percent compared with last year, which the "
    "team attributes to the new buffer strips along the farmland on the northern shore. Oxygen "
    "levels in the deep water remained low in August. The institute recommends extending the buffer "
    "strips to the eastern shore and continuing the weekly measurements for another three years.",
    "The annual report of Harbor Logistics shows revenue of 312 million dollars, up 8 percent. The "
    "company opened two warehouses, in Rotterdam and in Gdansk, and hired 450 new employees. Fuel "
    "costs rose by 14 percent, which reduced the operating margin from 9.1 to 7.6 percent. The board "
    "proposes a dividend of 1.20 dollars per share and plans to convert half of its truck fleet to "
    "electric trucks by 2030.",
    "The mountain rescue service of the Alta Valley answered 214 calls this summer, 31 more than "
    "last year. Most calls came from hikers with knee or ankle injuries on the Ridge Trail and the "
    "Glacier Path. Two helicopters flew 96 missions. The service asks hikers to carry a charged phone, "
    "a map of the valley and enough water, and to check the weather forecast before leaving the hut.",
    "The Riverside hospital reduced the average waiting time in its emergency department from 4 "
    "hours to 2 hours and 40 minutes. The hospital added six beds, opened a fast track for minor "
    "injuries and hired nine nurses. Patient satisfaction rose from 61 to 78 percent in the annual "
    "survey. The director said the next step is a new triage system that will start in January.",
    "The Greenfield farmers' cooperative harvested 18,000 tonnes of wheat and 6,500 tonnes of barley. "
    "A dry June cut the wheat yield by 11 percent, but prices rose, so income stayed stable. The "
    "cooperative invested in two grain dryers and a solar roof on the storage hall in Greenfield. "
    "Members voted to start an organic pilot on 300 hectares next spring.",
)


def summarization_prompts() -> list[tuple[int, ...]]:
    """Each report in the model's chat form, asking for a summary that quotes it."""
    tok = Tokenizer.from_file(str(ensure_artifact() / "tokenizer.json"))
    prompts = []
    for text in SUMMARIES:
        ask = f"Summarize this report. Repeat its key facts and figures word for word.\n\n{text}"
        chat = f"<|im_start|>user\n{ask}<|im_end|>\n<|im_start|>assistant\n"
        prompts.append(tuple(tok.encode(chat, add_special_tokens=False).ids))
    return prompts
