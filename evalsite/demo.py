"""The demo that `make run` loads: a team, a user, two agents and a dataset.

The knowledge agent's knowledge deliberately lacks three facts that the dataset
asks about (the support phone number, the Enterprise SLA credit and the
non-profit discount), so the first demo run has failures to learn from and the
suggestions have something real to fix.
"""

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import transaction

from accounts.services import team_create
from agents.models import Agent
from agents.services import agent_create
from datasets.services import case_bulk_create, dataset_create

# Demo-only credentials, printed by `make run`. Never use them on a server others can reach.
DEMO_USERNAME = "demo"
DEMO_PASSWORD = "evalsite-demo"
DEMO_TEAM = "Acme QA"
KNOWLEDGE_AGENT = "Acme Cloud Support"
LLM_AGENT = "Acme Cloud Support (LLM)"
DATASET = "Support policy smoke test"
VERSION_NOTE = "Created by the demo loader"

# One passage per paragraph: the knowledge agent answers with the best-matching one.
KNOWLEDGE = """\
Plans and pricing: Acme Cloud has three plans. Starter costs $19 per month and includes 3 projects and 50 GB of storage. Team costs $79 per month and includes unlimited projects, 1 TB of storage and up to 25 seats. Enterprise has custom pricing and adds single sign-on (SSO), audit logs and a dedicated account manager. Annual billing saves 20% on Starter and Team.

Free trial: every new account starts with a 14-day free trial of the Team plan. No credit card is required for the trial.

Refunds: a new subscription can be refunded in full within 30 days of the first payment. After 30 days, monthly plans are not refunded; annual plans are refunded pro rata for the unused full months when the customer cancels. Refunds go back to the original payment method within 5 to 10 business days.

Cancellation: customers can cancel at any time in Settings > Billing. The plan stays active until the end of the paid period.

Plan changes: upgrades take effect immediately and are billed pro rata for the rest of the billing period. Downgrades take effect at the next billing date.

Payment methods: Acme Cloud accepts Visa, Mastercard and American Express. Annual Enterprise contracts can also pay by bank transfer on invoice, net 30 days. Prices exclude VAT.

Support hours and channels: the support team answers email and chat from Monday to Friday, 08:00 to 20:00 CET. Enterprise customers also get 24/7 support for Severity 1 incidents. Write to support@acme-cloud.example or use the chat in the dashboard.

Response times: the first response target is 2 business days on Starter, 1 business day on Team and 4 hours on Enterprise (1 hour for Severity 1 incidents).

Uptime SLA: the Team and Enterprise plans include a 99.9% monthly uptime commitment, and Enterprise customers can sign a 99.95% SLA. Uptime is published on the status page. Service credits must be requested within 30 days of the incident by opening a support ticket.

Data retention: after a cancellation, project data stays available for export for 30 days and is then permanently deleted within the next 7 days. Backups are kept for 35 days. A deleted project can be restored from the dashboard within 14 days.

Security and data location: all data is encrypted at rest with AES-256 and in transit with TLS 1.2 or later. Data is stored in the EU (Frankfurt) region by default; Enterprise customers can choose the US (Virginia) region instead."""

INSTRUCTIONS = (
    "You are the support assistant of Acme Cloud, a cloud hosting product. Answer customer questions "
    "about plans, billing, refunds, support and data handling from the knowledge below. Be brief and "
    "give the exact numbers, time limits and contact details. If the knowledge does not answer the "
    "question, say so and offer to open a support ticket; never guess."
)

SKILLS = """\
- Explain the plans, prices and what each plan includes.
- Walk a customer through refunds, cancellation and plan changes.
- Look up an order with the lookup_order tool before answering questions about a specific payment."""

GUARDRAILS = """\
- Never promise a refund, discount or credit that the policy does not grant.
- Never ask for a full card number, a password or a one-time code.
- Hand legal, security incident and data-deletion requests to a human agent."""

TOOLS = [
    {
        "name": "lookup_order",
        "description": "Look up an order by its id and return its plan, amount, status and payment date.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string", "description": "The order id, e.g. A-1042"}},
            "required": ["order_id"],
        },
        "result": '{"order_id": "A-1042", "plan": "Team", "amount": "79.00 USD", "status": "paid", '
        '"paid_at": "2026-10-02"}',
    }
]

EVALUATION_CRITERIA = (
    "The answer must state the specific facts of the expected answer: amounts, percentages, time limits, "
    "opening hours and contact details. Extra correct detail is fine. A vague, generic or invented answer fails."
)

# (case_id, tags, question, expected answer). Every expected answer states facts (so the offline
# scorer can check it, and no expected answer describes behaviour). The last three each need a
# fact that is not in KNOWLEDGE, next to one that is: the fact is what the knowledge should learn,
# the whole answer is what it must not be taught (suggestions/leaks.py).
CASES: list[tuple[str, list[str], str, str]] = [
    (
        "refund-window",
        ["refunds"],
        "How long do I have to ask for a full refund?",
        "A new subscription can be refunded in full within 30 days of the first payment.",
    ),
    (
        "support-hours",
        ["support"],
        "When is your support team available?",
        "Email and chat support are available Monday to Friday, 08:00 to 20:00 CET. "
        "Enterprise customers also get 24/7 support for Severity 1 incidents.",
    ),
    (
        "data-after-cancel",
        ["data-retention"],
        "What happens to my data after I cancel?",
        "Project data stays available for export for 30 days after cancellation and is then "
        "permanently deleted within the next 7 days.",
    ),
    (
        "team-uptime",
        ["sla"],
        "What uptime does the Team plan guarantee?",
        "The Team plan includes a 99.9% monthly uptime commitment.",
    ),
    (
        "team-price",
        ["pricing"],
        "How much does the Team plan cost?",
        "The Team plan costs $79 per month; annual billing saves 20%.",
    ),
    (
        "free-trial",
        ["pricing", "trial"],
        "Is there a free trial, and do I need a credit card for it?",
        "Yes: a 14-day free trial of the Team plan, and no credit card is required.",
    ),
    (
        "data-location",
        ["security"],
        "Where is my data stored?",
        "In the EU (Frankfurt) region by default; Enterprise customers can choose the US (Virginia) region.",
    ),
    (
        "phone-support",
        ["support", "missing-knowledge"],
        "What is the phone number for customer support?",
        "Phone support is on +1 555 0142 377 for customers on the Team and Enterprise plans. "
        "Support answers Monday to Friday, 08:00 to 20:00 CET.",
    ),
    (
        "enterprise-sla-credit",
        ["sla", "missing-knowledge"],
        "How much service credit do Enterprise customers get when the uptime SLA is missed?",
        "Enterprise customers get a service credit of 10% of the monthly fee when uptime falls below 99.95%, "
        "and 25% when it falls below 99.0%. Credits must be requested within 30 days of the incident.",
    ),
    (
        "nonprofit-discount",
        ["pricing", "missing-knowledge"],
        "Do you offer a discount on the Team plan for non-profit organisations?",
        "Yes: registered non-profit organisations get 50% off the Team plan. They apply by emailing "
        "billing@acme-cloud.example with proof of their status. The Team plan otherwise costs $79 per month.",
    ),
]


@dataclass
class DemoData:
    user: User
    created: bool
    # False when someone changed the demo user's password after the first load.
    default_password: bool


@transaction.atomic
def demo_load() -> DemoData:
    """Load the demo once: when the demo user exists, change nothing.

    `make run` calls it on every start, so it must be idempotent; and since a team
    may edit, rename or delete the demo agents and dataset, later starts leave
    them alone rather than bring back what someone removed.
    """
    user = User.objects.filter(username=DEMO_USERNAME).first()
    if user is not None:
        return DemoData(user=user, created=False, default_password=user.check_password(DEMO_PASSWORD))
    user = User.objects.create_user(username=DEMO_USERNAME, password=DEMO_PASSWORD)
    team = team_create(user=user, name=DEMO_TEAM)
    knowledge_agent = agent_create(
        team=team,
        user=user,
        name=KNOWLEDGE_AGENT,
        kind=Agent.Kind.KNOWLEDGE,
        description="Answers from Acme Cloud's support policy with no model: the offline demo agent.",
        note=VERSION_NOTE,
        instructions=INSTRUCTIONS,
        knowledge=KNOWLEDGE,
    )
    agent_create(
        team=team,
        user=user,
        name=LLM_AGENT,
        kind=Agent.Kind.LLM,
        description="The same support policy answered by a language model, with an order lookup tool.",
        note=VERSION_NOTE,
        instructions=INSTRUCTIONS,
        skills=SKILLS,
        knowledge=KNOWLEDGE,
        guardrails=GUARDRAILS,
        temperature=0.2,
        tools=TOOLS,
    )
    dataset = dataset_create(
        agent=knowledge_agent,
        user=user,
        name=DATASET,
        description="Ten questions customers ask about Acme Cloud's support policy.",
        evaluation_criteria=EVALUATION_CRITERIA,
    )
    case_bulk_create(
        dataset=dataset,
        cases=[
            {"case_id": case_id, "tags": tags, "question": question, "expected_answer": expected}
            for case_id, tags, question, expected in CASES
        ],
    )
    return DemoData(user=user, created=True, default_password=True)
