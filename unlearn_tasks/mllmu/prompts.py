"""The release's prompts (``eval.py`` of franciscoliu/MLLMU-Bench, LLaVA branch), written from its behaviour: the
``USER: ... ASSISTANT:`` frame, ``<image>`` where a photo goes (lm-eval's placeholder, replaced by the model's image
token), the few-shot blocks that precede the question, and how the answer is read from the generated text."""

from __future__ import annotations

IMAGE = "<image>"
CLASSIFICATION_INSTRUCTION = "Just give ONE letter representing the answer directly."
CLOZE_INSTRUCTION = "Please **ONLY** provide the correct answer that should replace the [Blank]."
GENERATION_INSTRUCTION = {
    True: "Answer the question based on your trained knowledge in one sentence accurately in ENGLISH.",
    False: "Answer the question based on your trained knowledge in one sentence in ENGLISH.",
}
ASSISTANT = "ASSISTANT:"


def options_text(options: dict[str, str]) -> str:
    return "\n".join(f"{k}: {v}" for k, v in options.items())


def classification_shot(question: str, options: dict[str, str], answer: str, image: bool) -> str:
    """One few-shot block (the release writes ``Question:`` and the four letters A-D here, only here)."""
    head = f"USER: {IMAGE}\n" if image else "USER:\n"
    letters = "".join(f"{k}: {options.get(k)}\n" for k in "ABCD")
    return f"{head}Question: {question}\n{letters}Correct Answer: {answer}\n"


def classification_prompt(shots: str, question: str, options: dict[str, str], image: bool) -> str:
    head = f"USER: {IMAGE}\n" if image else "USER:\n"
    return f"{shots}{head}{question}\n{options_text(options)}\n{CLASSIFICATION_INSTRUCTION}\n{ASSISTANT}"


def cloze_question(question: str) -> str:
    return question.replace("__", "[Blank]") + "\n" + CLOZE_INSTRUCTION


def cloze_shot(question: str, answer: str, image: bool) -> str:
    head = f"USER:{IMAGE}\n" if image else "USER:\n"  # the release's few-shot image turn has no space
    return f"{head}{cloze_question(question)}\nCorrect Answer: {answer}\n"


def cloze_prompt(shots: str, question: str, image: bool) -> str:
    head = f"USER: {IMAGE}\n" if image else "USER:\n"
    return f"{shots}{head}{cloze_question(question)}\n{ASSISTANT}"


def generation_prompt(question: str, image: bool) -> str:
    """No few-shot; the image prompt ends with a space after ``ASSISTANT:``, the text prompt does not (as released)."""
    if image:
        return f"USER: {IMAGE}\n{question}\n{GENERATION_INSTRUCTION[True]}\n{ASSISTANT} "
    return f"USER: {question}\n{GENERATION_INSTRUCTION[False]}\n{ASSISTANT}"


def generation_question(prompt: str) -> str | None:
    """The question of a :func:`generation_prompt` (image or text), or None when ``prompt`` is not one."""
    for head, tail in ((f"USER: {IMAGE}\n", f"\n{GENERATION_INSTRUCTION[True]}\n{ASSISTANT} "),
                       ("USER: ", f"\n{GENERATION_INSTRUCTION[False]}\n{ASSISTANT}")):
        if prompt.startswith(head) and prompt.endswith(tail) and len(prompt) > len(head) + len(tail):
            return prompt[len(head):-len(tail)]
    return None


def response(generated: str) -> str:
    """The answer as the release reads it: it decodes prompt and generation together and keeps what lies between
    the prompt's ``ASSISTANT:`` and the next one, stripped; i.e. the generation up to an ``ASSISTANT:`` it writes."""
    return generated.split(ASSISTANT)[0].strip()


def choice_letter(answer: str, letters: str) -> str | None:
    """The release's extraction: the answer's first character, upper-cased, if it is one of the options' keys."""
    return answer[0].upper() if answer and answer[0].upper() in letters else None
